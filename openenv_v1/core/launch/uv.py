"""OpenEnv's UV provider, extended to serve real env projects, own its process tree
and fail fast.

`UVProvider` starts `uv run --isolated --project P -- uvicorn APP` and polls `/health`.
This subclass keeps that shape and closes the gaps that real OpenEnv env folders and
rollouts run into:

- App and working directory. The server runs with the env's folder as its working
  directory and on its import path, as OpenEnv's Dockerfiles run it, so both the
  `server.app:app` and the `<pkg>.server.app:app` layouts import. Without an `app`
  setting, the candidates the project's own files name (`EnvProject.app_candidates`)
  are tried in turn while the previous one cannot be imported.
- Reuse. Instead of a new isolated environment per launch, each project gets one
  prepared environment of its own, outside the project (`prepared_env_dir`), that uv
  keeps in sync with the project and its lock; a repeated launch skips the install.
  The project is touched as a plain `uv run` touches it (uv may write its `uv.lock`).
  The launch holds that environment until `stop()`, and prunes the cache (`cache`).
- Environment. The server starts from an allow-list, not the launcher's
  environment, with a HOME of its own per eval (`server_env`, which says exactly
  what it sees).
- Ownership. `uv` leads a process group of its own (stopping the group reaches
  uvicorn and its workers) and receives SIGTERM when the thread that started it dies;
  uv forwards that SIGTERM to uvicorn.
- Port. The launcher picks a free port, which is free again until uvicorn binds it;
  when another process takes it in between, the server is relaunched on another
  one, and `wait_for_ready()` returns the URL it finally serves at.
- Diagnosis. A server that crashes on start (a wrong `app`, a missing dependency, a
  Python uv cannot provide) is noticed at once, and the error carries the tail of its
  output and, where the cause is known, what to change.
- gradio is kept out of servers whose project does not declare it, unless asked
  (`web_ui`): OpenEnv imports it only for its optional web interface, and that import
  is about half of a server's start.

`uv_launch_plan(target)` is the UV place's plan (`plan.PLACES`), its options
`UVOptions` (read as every place reads its own, `launch.options.read_options`), its
readiness wait `readiness.wait_ready`'s. The prepared environment is
`uv_prepared`'s, the reading of a crashed server's output `uv_diagnosis`'s.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.cache import prune_at_launch
from openenv_v1.core.launch.env_project import AppChoice, EnvProject
from openenv_v1.core.launch.options import read_options
from openenv_v1.core.launch.plan import LaunchPlan, run_here
from openenv_v1.core.launch.process_group import start_group, stop_group
from openenv_v1.core.launch.readiness import ServerGone, client_host, wait_ready
from openenv_v1.core.launch.server_env import server_environ
from openenv_v1.core.launch.uv_diagnosis import (
    ADDRESS_IN_USE,
    GRADIO_NEEDED,
    GRADIO_REFUSED,
    app_import_failure,
    crash_hint,
    no_app_message,
)
from openenv_v1.core.launch.uv_prepared import (
    hold_prepared_env,
    mark_prepared,
    prepared_env_dir,
    prepared_uvicorn,
    release_prepared_env,
)
from openenv_v1.core.openenv_lines import (
    GIT_URL_PREFIX,
    UVProvider,
    clone_git_project,
    find_free_port,
)
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

logger = logging.getLogger(__name__)

LOG_TAIL_CHARS = 2000
NOT_READY = "was not ready within"
"""What a launch failure says when the server did not answer `/health` in time (and
only then: a server that exited says how)."""
_PORT_MOVES = 5
"""Relaunches on another port when the picked one was taken first."""
# Projects (their folders) found to import gradio in this process: launched with it.
_IMPORTS_GRADIO: set[str] = set()
# Holds a `gradio` package that refuses to import (see no_gradio/gradio/__init__.py).
NO_GRADIO_DIR = str(Path(__file__).parents[1] / "no_gradio")


def uv_bin_dir() -> str | None:
    """Directory of the `uv` binary shipped by the `uv` PyPI package, if installed."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    with contextlib.suppress(Exception):
        return str(Path(find_uv_bin()).parent)
    return None


def ensure_uv_on_path() -> None:
    """Put the packaged `uv` on PATH when none is there (e.g. `.venv/bin/eval` run
    without activating the venv), since OpenEnv's provider looks `uv` up on PATH."""
    if shutil.which("uv") is None and (bin_dir := uv_bin_dir()):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


class SupervisedUVProvider(UVProvider):
    """A `UVProvider` that finds the env's app, reuses its environment, dies with its
    owner and reports why it failed.

    Start it from the thread that lives as long as the server should (the parent-death
    signal is tied to the starting thread); `run_on_owner` runs a callable on that
    thread, for the relaunch of a next app candidate from `wait_for_ready`. `stop()`
    ends the whole process group, and no launch follows it.
    """

    def __init__(
        self,
        *,
        project_path: str,
        app: str | None = None,
        web_ui: bool = False,
        run_on_owner: Callable[[Callable[[], Any]], Any] | None = None,
        cache_max_gb: float | None = None,
        **kwargs: Any,
    ) -> None:
        ensure_uv_on_path()
        self.web_ui = web_ui
        self.cache_max_gb = cache_max_gb
        self.run_on_owner = run_on_owner or run_here
        self._user_app = app
        try:
            super().__init__(project_path=project_path, app=app or "", **kwargs)
        except RuntimeError as e:
            raise EnvFailure(
                f"cannot launch with the UV provider: {e} "
                "(install uv, or `uv sync` this project so its packaged uv is used)"
            ) from e
        # openenv-core 0.3.0 resolves the path even for a `git+` URL (mangling it)
        # and has no clone directory: set both as openenv 0.10 does.
        if project_path.startswith(GIT_URL_PREFIX):
            self.project_path = project_path
        self._clone_dir: str | None = getattr(self, "_clone_dir", None)
        self.project: EnvProject | None = None
        self.app_choice: AppChoice | None = None
        self.failed_apps: list[tuple[AppChoice, str]] = []
        """Candidates that could not be imported, with the line that said so."""
        self.gradio_hidden = False
        self.notes: list[str] = []
        """What the user should know about this launch (e.g. gradio was needed)."""
        self.reused_env = False
        """The server runs from the project's prepared environment without uv."""
        self._candidates: list[AppChoice] = []
        self._launch: tuple[int, dict[str, str], int] | None = None
        self._port_picked = False
        """The launcher chose the port (it may choose another)."""
        self._port_moves = 0
        self._env_dir = Path()
        self._env_held: BinaryIO | None = None
        # The server's output: a temp file unlinked once open, read through this.
        self._log: BinaryIO | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def running(self) -> bool:
        """Whether the started server process is still alive."""
        return self._process is not None and self._process.poll() is None

    def start(
        self,
        port: int | None = None,
        env_vars: dict[str, str] | None = None,
        workers: int = 1,
        **_: object,
    ) -> str:
        """Fetch the project if it is a `git+` URL, choose the app, and start the
        server with the first candidate; returns its base URL (`wait_for_ready()`
        returns the final one)."""
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError("UVProvider is already running")
        project = self.project = EnvProject.read(self._project_dir())
        if self._user_app:
            self._candidates = [
                AppChoice(self._user_app, f"set in {setting('provider_kwargs.app')}")
            ]
        else:
            self._candidates = project.app_candidates()
        if not self._candidates:
            raise EnvFailure(
                f"no ASGI app found in {project.path}: no [project.scripts] server "
                "entry, no `app` in openenv.yaml, no server/app.py; set "
                f"{setting('provider_kwargs.app')} to the module that calls "
                "`create_app`, e.g. `<pkg>.server.app:app`"
            )
        # Built from an allow-list, not inherited: see `server_env`.
        env = server_environ({**(self.env_vars or {}), **(env_vars or {})})
        source = self.project_path
        self._env_dir = prepared_env_dir(source, project.name)
        # Held until stop(): see `cache` for what a prune at launch removes.
        self._env_held = hold_prepared_env(self._env_dir, source)
        prune_at_launch(self.cache_max_gb)
        env["UV_PROJECT_ENVIRONMENT"] = str(self._env_dir)
        self.gradio_hidden = not (
            self.web_ui
            or project.declares_gradio
            or str(project.path) in _IMPORTS_GRADIO
            or _truthy(env.get("ENABLE_WEB_INTERFACE"))
        )
        env["PYTHONPATH"] = os.pathsep.join(
            [str(project.path), *filter(None, [env.get("PYTHONPATH")])]
        )
        self._port_picked = port is None
        self._launch = (port or find_free_port(), env, workers)
        self._spawn(self._candidates[0])
        assert self._base_url is not None
        return self._base_url

    def _project_dir(self) -> str:
        if not self.project_path.startswith(GIT_URL_PREFIX):
            return self.project_path
        try:
            self._clone_dir = clone_git_project(
                self.project_path, self.context_timeout_s
            )
        except RuntimeError as e:
            raise EnvFailure(
                "could not fetch the environment source "
                f"{self.project_path[len(GIT_URL_PREFIX) :]}: {e}. Remote Space ids "
                "need git and network access; point "
                f"{setting('provider_kwargs.project_path')} at a local checkout, or "
                f"connect to a running server with {setting('base_url')}"
            ) from e
        return self._clone_dir

    def _spawn(self, choice: AppChoice) -> None:
        """Start `uv run ... uvicorn <choice>` in the env's folder, logging to a
        fresh file. Refused once `stop()` has run."""
        assert self._launch is not None and self.project is not None
        port, env, workers = self._launch
        server = ["uvicorn", choice.app, "--host", self.host, "--port", str(port)]
        server += ["--workers", str(workers), *(["--reload"] if self.reload else [])]
        if self.gradio_hidden:
            env = {
                **env,
                "PYTHONPATH": f"{NO_GRADIO_DIR}{os.pathsep}{env['PYTHONPATH']}",
            }
        prepared = prepared_uvicorn(self._env_dir, self.project.path)
        self.reused_env = prepared is not None
        if prepared is not None:
            command = [str(prepared), *server[1:]]
            env = {**env, "VIRTUAL_ENV": str(self._env_dir)}
            env["PATH"] = os.pathsep.join([str(prepared.parent), env.get("PATH", "")])
        else:
            command = ["uv", "run", "--project", str(self.project.path), "--", *server]
        with self._lock:
            if self._stopped:
                raise EnvFailure("the launch was stopped")
            self._discard_log()
            self.app_choice, self.app = choice, choice.app
            fd, log_path = tempfile.mkstemp(prefix="openenv-uv-", suffix=".log")
            # Unlinked at once: the server writes it and `log_tail` reads it through
            # open descriptors, so nothing is left on disk however either ends
            # (SIGKILL of the eval included).
            self._log = open(log_path, "rb")  # closed by _discard_log
            os.unlink(log_path)
            try:
                self._process = start_group(
                    command,
                    cwd=self.project.path,
                    env=env,
                    stdout=fd,
                    stderr=subprocess.STDOUT,
                )
            except OSError as e:
                raise EnvFailure(f"could not run {command[0]!r}: {e}") from e
            finally:
                os.close(fd)
        logger.info(
            "%s: serving app %s (%s) from %s%s",
            self.project.name,
            choice.app,
            choice.source,
            self.project.path,
            ", reusing its prepared environment" if self.reused_env else "",
        )
        self._base_url = f"http://{client_host(self.host)}:{port}"

    def wait_for_ready(self, timeout_s: float | None = None) -> str:
        """Poll `/health` until 200, and return the server's base URL. A server that
        exits before it is ready is relaunched (on the owner thread) on another port
        when the port picked for it was taken first, or with the next app candidate
        when its app cannot be imported; any other exit fails at once, naming the
        cause. Each start gets `timeout_s` of its own: a relaunch is the launcher's
        retry, not the server's slowness, and must not inherit a spent deadline."""
        timeout_s = self.context_timeout_s if timeout_s is None else timeout_s
        while True:
            process, url = self._process, self._base_url
            if process is None or url is None:
                raise EnvFailure("the UV provider was not started, or was stopped")
            try:
                self._wait_started(process, url, timeout_s)
            except ServerGone:
                code = process.poll()
                if self._process is process and code is not None:
                    self._relaunch_or_fail(code)
                continue  # relaunched, or stopped (the loop's first check says so)
            assert self.project is not None
            mark_prepared(self._env_dir, self.project.path)
            return url

    def _wait_started(
        self, process: subprocess.Popen[bytes], url: str, timeout_s: float
    ) -> None:
        """Until the server `process` at `url` answers; `ServerGone` once it exited
        (or was stopped)."""
        wait_ready(
            f"{url}/health",
            timeout_s=timeout_s,
            interval_s=0.05,
            running=lambda: self._process is process and process.poll() is None,
            not_ready=lambda: EnvFailure(
                f"env server `uvicorn {self.app}` at {url} "
                f"{NOT_READY} {timeout_s:.0f}s (raise "
                f"{setting('launch_timeout_s')} if it is just slow); its output "
                f"ends with:\n{self.log_tail()}"
            ),
        )

    def _relaunch_or_fail(self, code: int) -> None:
        """After the server exited before it was ready: relaunch it on another port
        when another process took the one picked for it, with gradio when hiding
        gradio killed it, or with the next app candidate when the app cannot be
        imported; otherwise fail, naming the cause."""
        tail = self.log_tail()
        choice = self.app_choice
        assert choice is not None and self.project is not None
        if (
            self._port_picked
            and self._port_moves < _PORT_MOVES
            and ADDRESS_IN_USE.search(tail)
        ):
            assert self._launch is not None
            taken, env, workers = self._launch
            self._port_moves += 1
            self._launch = (find_free_port(), env, workers)
            logger.info(
                "%s: port %d was taken before the server bound it; relaunching on %d",
                self.project.name,
                taken,
                self._launch[0],
            )
            self.run_on_owner(lambda: self._spawn(choice))
            return
        if self.gradio_hidden and GRADIO_REFUSED in tail:
            self.gradio_hidden = False
            _IMPORTS_GRADIO.add(str(self.project.path))
            self.notes.append(GRADIO_NEEDED)
            logger.warning("%s: %s", self.project.name, GRADIO_NEEDED)
            self.run_on_owner(lambda: self._spawn(choice))
            return
        failure = app_import_failure(choice, tail)
        if failure is None:
            raise EnvFailure(
                f"env server `uv run ... uvicorn {choice.app}` exited with code {code} "
                f"before it was ready{self._diagnose(tail)}; its output ends with:\n"
                f"{tail}"
            )
        self.failed_apps.append((choice, failure))
        left = self._candidates[len(self.failed_apps) :]
        if not left:
            raise EnvFailure(no_app_message(self._user_app, self.failed_apps, tail))
        logger.info(
            "app %s (%s) cannot be imported: %s; trying %s",
            choice.app,
            choice.source,
            failure,
            left[0].app,
        )
        self.run_on_owner(lambda: self._spawn(left[0]))

    def _diagnose(self, tail: str) -> str:
        """Name the usual cause of a crashed start in words the user can act on."""
        return crash_hint(
            tail,
            port=self._launch[0] if self._launch is not None else None,
            port_picked=self._port_picked,
            python_requirement=self.project.python_requirement
            if self.project
            else None,
        )

    def log_tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        log = self._log
        if log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed meanwhile
            # The last `limit` characters lie within the last 4 * `limit` bytes.
            size = os.fstat(log.fileno()).st_size
            data = os.pread(log.fileno(), 4 * limit, max(0, size - 4 * limit))
            return data.decode(errors="replace")[-limit:].strip()
        return ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace_s`, then remove temp
        files. No launch follows."""
        with self._lock:
            self._stopped = True
            process, self._process, self._base_url = self._process, None, None
        if process is not None:
            # uv exits once uvicorn has; anything left in the group gets no grace.
            stop_group(process, grace_s=grace_s)
        with self._lock:
            self._discard_log()
            release_prepared_env(self._env_held)
            if self._clone_dir is not None:
                shutil.rmtree(self._clone_dir, ignore_errors=True)
                self._clone_dir = None

    def _discard_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class UVOptions(BaseModel):
    """The UV keys of `provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    project_path: str | None = None
    """The env's source checkout (a uv project), or a `git+` URL; unset, the
    Space's repository (`git+https://huggingface.co/spaces/<env>`)."""
    app: str | None = None
    """The ASGI app uvicorn serves (`<pkg>.server.app:app`); unset, the candidates
    the project's own files name are tried in turn."""
    host: str = "127.0.0.1"
    """Address uvicorn binds (a wildcard one is reached at 127.0.0.1)."""
    port: int | None = None
    """Port uvicorn binds; unset, a free one (another if it is taken first)."""
    workers: int = Field(1, ge=1)
    """uvicorn's worker processes."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server, beside its allow-list (`server_env`)."""
    reload: bool = False
    """uvicorn's `--reload`."""
    context_timeout_s: float
    """Seconds the server may take to answer `/health` (the target's
    `launch_timeout_s` unless set)."""
    web_ui: bool
    """Let the server import gradio (the target's `web_ui` unless set)."""


def uv_launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of a `SupervisedUVProvider` for `target`, its options read as
    `UVOptions`. Raises `EnvFailure` for a bad `project_path` or provider option."""
    assert target.env is not None
    defaults = {"context_timeout_s": target.launch_timeout_s, "web_ui": target.web_ui}
    options = read_options(
        UVOptions,
        {**defaults, **target.provider_kwargs},
        "UV",
        setting("provider_kwargs"),
    )
    project_path = options.project_path or (
        f"git+https://huggingface.co/spaces/{target.env}"
    )
    if not project_path.startswith("git+") and not os.path.isdir(project_path):
        raise EnvFailure(
            f"project_path {project_path!r} is not a directory; set "
            f"{setting('provider_kwargs.project_path')} to the env's source checkout"
        )
    provider = SupervisedUVProvider(
        project_path=project_path,
        **options.model_dump(include={"app", "host", "reload", "web_ui"}),
        context_timeout_s=options.context_timeout_s,
        cache_max_gb=target.cache_max_gb,
    )
    env_vars = {**options.env_vars, **target.secret_env}
    start_args = {"port": options.port, "workers": options.workers}
    return LaunchPlan(provider, {**start_args, "env_vars": env_vars})


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}
