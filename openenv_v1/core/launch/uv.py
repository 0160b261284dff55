"""An env server launched with uv on this host, owned and fail-fast.

`SupervisedUVProvider` has OpenEnv's `RuntimeProvider` interface and takes OpenEnv's
uv check, free port and git clone, but starts, waits and stops itself: the server
runs in the env's folder (both app layouts import; without `app`, the project's
candidates are tried in turn, `uv_starts`), from one prepared environment per
project that a repeated launch reuses (`uv_prepared`, `cache`), with an allow-listed
environment (`server_env`), as a process group SIGTERMed when its starting thread
dies (`process_group`), relaunched on another port when its port was taken first,
failing at once with its output's tail and cause when it crashes (`uv_diagnosis`),
and without gradio unless its project declares it or `web_ui` (half of a start).
In a pool, a server is forked from a template that imported the app once
(`uvicorn_forks`); a forked server that exits before it is ready is started afresh,
whose output says why (one killed by a signal fails as a killed start does).

    provider = uv_launch_plan(target).launcher
    provider.start(); url = provider.wait_for_ready(); ...; provider.stop()
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.cache import prune_at_launch
from openenv_v1.core.launch.env_project import AppChoice, EnvProject, local_folder
from openenv_v1.core.launch.options import UVOptions, read_options
from openenv_v1.core.launch.plan import LaunchPlan, PoolShared, run_here
from openenv_v1.core.launch.process_group import Child, start_group, stop_group
from openenv_v1.core.launch.readiness import ServerGone, client_host, wait_ready
from openenv_v1.core.launch.uv_prepared import (
    hold_prepared_env,
    mark_prepared,
    prepared_env_dir,
    release_prepared_env,
)
from openenv_v1.core.launch.uv_server import (
    LOG_TAIL_CHARS,
    NO_GRADIO_DIR,
    ServerOutput,
    ServerSpec,
    server_base_env,
    server_command,
)
from openenv_v1.core.launch.uv_starts import UVStarts, hides_gradio
from openenv_v1.core.launch.uvicorn_forks import (
    ForkableStart,
    ForkedServer,
    UvicornForks,
    UvicornTemplate,
)
from openenv_v1.core.openenv_lines import (
    GIT_URL_PREFIX,
    RuntimeProvider,
    check_uv_installed,
    clone_git_project,
    find_free_port,
)
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

__all__ = [
    "LOG_TAIL_CHARS",
    "NOT_READY",
    "NO_GRADIO_DIR",
    "SupervisedUVProvider",
    "ensure_uv_on_path",
    "uv_bin_dir",
    "uv_launch_plan",
]

logger = logging.getLogger(__name__)

NOT_READY = "was not ready within"
"""What a launch failure says when the server did not answer `/health` in time."""


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
    """Put the packaged `uv` on PATH when none is there (a venv not activated)."""
    if shutil.which("uv") is None and (bin_dir := uv_bin_dir()):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


class SupervisedUVProvider(RuntimeProvider):
    """An env server started with uv (the module docstring). Start it from the
    thread that lives as long as the server should (the parent-death signal is tied
    to it); `run_on_owner` runs a relaunch on that thread. `stop()` ends the process
    group, and no launch follows it."""

    starts_here = True
    """Its start runs on this host's CPU (`pool_launch.STARTS_AT_ONCE`)."""

    def __init__(
        self,
        *,
        project_path: str,
        app: str | None = None,
        host: str = "0.0.0.0",
        reload: bool = False,
        env_vars: dict[str, str] | None = None,
        context_timeout_s: float = 60.0,
        web_ui: bool = False,
        run_on_owner: Callable[[Callable[[], Any]], Any] | None = None,
        cache_max_gb: float | None = None,
    ) -> None:
        ensure_uv_on_path()
        try:
            check_uv_installed()
        except RuntimeError as e:
            raise EnvFailure(
                f"cannot launch with the UV provider: {e} "
                "(install uv, or `uv sync` this project so its packaged uv is used)"
            ) from e
        # A `git+` URL is cloned at start(); a local path is resolved now.
        git = project_path.startswith(GIT_URL_PREFIX)
        self.project_path = project_path if git else os.path.abspath(project_path)
        self.app = app or ""
        self.host, self.reload, self.env_vars = host, reload, env_vars
        self.context_timeout_s = context_timeout_s
        self.web_ui = web_ui
        self.cache_max_gb = cache_max_gb
        self.run_on_owner = run_on_owner or run_here
        self.pool_shared: PoolShared | None = None
        """Set by a pool: its servers fork from its templates (`uvicorn_forks`)."""
        self._fork_next = True
        self._user_app = app
        self.project: EnvProject | None = None
        self.app_choice: AppChoice | None = None
        self.reused_env = False
        """The server runs from the project's prepared environment without uv."""
        self._starts: UVStarts | None = None
        self._env: dict[str, str] = {}
        self._env_dir = Path()
        self._env_held: BinaryIO | None = None
        self._clone_dir: str | None = None
        self._process: Child | None = None
        self._output: ServerOutput | None = None
        self._base_url: str | None = None
        self._lock = threading.Lock()
        self._stopped = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def failed_apps(self) -> list[tuple[AppChoice, str]]:
        """Candidates that could not be imported, with the line that said so."""
        return self._starts.failed_apps if self._starts is not None else []

    @property
    def notes(self) -> list[str]:
        """What the user should know about this launch (e.g. gradio was needed)."""
        return self._starts.notes if self._starts is not None else []

    @property
    def gradio_hidden(self) -> bool:
        """The current start hides gradio from the server."""
        return self._starts is not None and self._starts.spec.hide_gradio

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
        """Fetch a `git+` project, choose the app, start the server; returns its base
        URL (`wait_for_ready()` returns the final one)."""
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError("UVProvider is already running")
        project = self.project = EnvProject.read(self._project_dir())
        spec = ServerSpec("", self.host, port or 0, workers, self.reload)
        picked = port is None
        starts = UVStarts(project, self._user_app, spec, port_picked=picked)
        source = self.project_path
        self._env_dir = prepared_env_dir(source, project.name)
        self._env_held = hold_prepared_env(self._env_dir, source)
        prune_at_launch(self.cache_max_gb)
        variables = {**(self.env_vars or {}), **(env_vars or {})}
        self._env = server_base_env(project, variables, self._env_dir)
        hide = hides_gradio(project, self.web_ui, self._env)
        starts.spec = replace(
            starts.spec, port=port or find_free_port(), hide_gradio=hide
        )
        self._starts = starts
        self._spawn()
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

    def _spawn(self) -> None:
        """Start `UVStarts.spec`'s server in the env's folder, its output in a fresh
        file; refused once `stop()` has run."""
        assert self._starts is not None and self.project is not None
        spec, choice = self._starts.spec, self._starts.choice
        command, env, self.reused_env = server_command(
            spec, self.project, self._env_dir, self._env
        )
        template = self._template(command, env)
        with self._lock:
            if self._stopped:
                raise EnvFailure("the launch was stopped")
            self._discard_output()
            self.app_choice, self.app = choice, choice.app
            output = self._output = ServerOutput.open()
            try:
                forked = (
                    template.fork(spec.host, spec.port, output.fd) if template else None
                )
                self._process = forked or start_group(
                    command,
                    cwd=self.project.path,
                    env=env,
                    stdout=output.fd,
                    stderr=subprocess.STDOUT,
                )
            except OSError as e:
                raise EnvFailure(f"could not run {command[0]!r}: {e}") from e
            finally:
                output.close_writer()
        logger.info(
            "%s: serving app %s (%s) from %s%s",
            self.project.name,
            choice.app,
            choice.source,
            self.project.path,
            ", forked from its template"
            if forked
            else ", reusing its prepared environment"
            if self.reused_env
            else "",
        )
        self._base_url = f"http://{client_host(self.host)}:{spec.port}"

    def _template(
        self, command: list[str], env: dict[str, str]
    ) -> UvicornTemplate | None:
        """The pool's template this start forks from, if it forks (a pool's, run
        from the prepared environment, not after a forked start crashed)."""
        shared = self.pool_shared
        forks = shared.get(UvicornForks) if shared and self._fork_next else None
        if forks is None or not self.reused_env:
            return None
        assert self._starts is not None and self.project is not None
        spec = self._starts.spec
        start = ForkableStart.of(Path(command[0]), spec, env, self.project.path)
        return forks.template(start, self.context_timeout_s) if start else None

    def wait_for_ready(self, timeout_s: float | None = None) -> str:
        """Poll `/health` until 200; returns the server's base URL. A server that
        exits first is started again on the owner thread as `UVStarts.next_start`
        says, or fails naming the cause. Each start gets `timeout_s` of its own (a
        relaunch is the launcher's retry, not the server's slowness)."""
        timeout_s = self.context_timeout_s if timeout_s is None else timeout_s
        while True:
            process, url = self._process, self._base_url
            if process is None or url is None or self._starts is None:
                raise EnvFailure("the UV provider was not started, or was stopped")
            try:
                self._wait_started(process, url, timeout_s)
            except ServerGone:
                code = process.poll()
                if self._process is process and code is not None:
                    if isinstance(process, ForkedServer) and code >= 0:
                        # Started afresh, its output says why (`next_start`).
                        self._fork_next = False
                    else:
                        self._starts.next_start(code, self.log_tail())
                    self.run_on_owner(self._spawn)
                continue  # relaunched, or stopped (the loop's first check says so)
            assert self.project is not None
            mark_prepared(self._env_dir, self.project.path)
            return url

    def _wait_started(self, process: Child, url: str, timeout_s: float) -> None:
        """Until `process` answers at `url`; `ServerGone` once it exited."""
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

    def log_tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        """The last `limit` characters of the current start's output."""
        output = self._output
        return output.tail(limit) if output is not None else ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace_s`, remove temp files;
        no launch follows."""
        with self._lock:
            self._stopped = True
            process, self._process, self._base_url = self._process, None, None
        if process is not None:
            stop_group(process, grace_s=grace_s)
        with self._lock:
            self._discard_output()
            release_prepared_env(self._env_held)
            if self._clone_dir is not None:
                shutil.rmtree(self._clone_dir, ignore_errors=True)
                self._clone_dir = None

    def _discard_output(self) -> None:
        if self._output is not None:
            self._output.close()
            self._output = None


def uv_launch_plan(target: EnvTarget) -> LaunchPlan:
    """A `SupervisedUVProvider` launch for `target`; `EnvFailure` for a bad option."""
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
    local_folder(project_path, "the env's source checkout")
    provider = SupervisedUVProvider(
        project_path=project_path,
        **options.model_dump(include={"app", "host", "reload", "web_ui"}),
        context_timeout_s=options.context_timeout_s,
        cache_max_gb=target.cache_max_gb,
    )
    env_vars = {**options.env_vars, **target.secret_env}
    start_args = {"port": options.port, "workers": options.workers}
    return LaunchPlan(provider, {**start_args, "env_vars": env_vars})
