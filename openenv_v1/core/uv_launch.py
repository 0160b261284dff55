"""OpenEnv's UV provider, extended to own its process tree and fail fast.

`UVProvider` starts `uv run --isolated --project P -- uvicorn APP` and polls `/health`.
Two gaps matter for rollouts, and this subclass closes them without changing how the
server is launched:

- Ownership. The upstream process joins its parent's process group and has no
  parent-death signal, so a SIGKILLed owner leaves `uv` and `uvicorn` behind. Here `uv`
  leads a process group of its own (stopping the group reaches uvicorn and its
  workers) and receives SIGTERM when the thread that started it dies; uv forwards that
  SIGTERM to uvicorn.
- Diagnosis. A server that crashes on start (a wrong `app`, a missing dependency) only
  showed up as a readiness timeout. Here its output goes to a log file, readiness
  notices the exit at once, and the error carries the tail of that log.

It also keeps gradio out of the server unless asked (`web_ui`): OpenEnv imports it only
for its optional web interface, and that import is about half of a server's start.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.light_import import without_gradio
from openenv_v1.core.process_group import die_with_owner, signal_group

with without_gradio():
    from openenv.core.containers.runtime.uv_provider import (
        GIT_URL_PREFIX,
        UVProvider,
        _clone_git_project,
        _create_uv_command,
        _find_free_port,
    )

LOG_TAIL_CHARS = 2000
# Holds a `gradio` package that refuses to import (see no_gradio/gradio/__init__.py).
_NO_GRADIO_DIR = str(Path(__file__).parent / "no_gradio")


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
    """A `UVProvider` whose server dies with its owner and reports why it failed.

    Start it from the thread that lives as long as the server should (the parent-death
    signal is tied to the starting thread). `stop()` ends the whole process group.
    """

    def __init__(self, *, project_path: str, web_ui: bool = False, **kwargs) -> None:
        ensure_uv_on_path()
        self.web_ui = web_ui
        try:
            super().__init__(project_path=project_path, **kwargs)
        except RuntimeError as e:
            raise EnvFailure(
                f"cannot launch with the UV provider: {e} "
                "(install uv, or `uv sync` this project so its packaged uv is used)"
            ) from e
        self._log_path: Path | None = None

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
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError("UVProvider is already running")
        project_path = self.project_path
        if project_path.startswith(GIT_URL_PREFIX):
            try:
                self._clone_dir = _clone_git_project(
                    project_path, self.context_timeout_s
                )
            except RuntimeError as e:
                raise EnvFailure(
                    f"could not fetch the environment source {project_path[len(GIT_URL_PREFIX) :]}: "
                    f"{e}. Remote Space ids need git and network access; point "
                    "task.user.provider_kwargs.project_path at a local checkout, or connect "
                    "to a running server with base_url"
                ) from e
            project_path = self._clone_dir
        bind_port = port or _find_free_port()
        command = _create_uv_command(
            host=self.host,
            port=bind_port,
            reload=self.reload,
            workers=workers,
            app=self.app,
            project_path=project_path,
        )
        env = {**os.environ, **(self.env_vars or {}), **(env_vars or {})}
        if not (self.web_ui or _truthy(env.get("ENABLE_WEB_INTERFACE"))):
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (_NO_GRADIO_DIR, env.get("PYTHONPATH")) if p
            )
        fd, log_path = tempfile.mkstemp(prefix="openenv-uv-", suffix=".log")
        self._log_path = Path(log_path)
        try:
            self._process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_owner,
            )
        except OSError as e:
            self._discard_files()
            raise EnvFailure(f"could not run {command[0]!r}: {e}") from e
        finally:
            os.close(fd)
        client_host = "127.0.0.1" if self.host in {"0.0.0.0", "::"} else self.host
        self._base_url = f"http://{client_host}:{bind_port}"
        return self._base_url

    def wait_for_ready(self, timeout_s: float | None = None) -> None:
        """Poll `/health` until 200; fail at once if the server process exits."""
        timeout_s = self.context_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:
                if self._process is None:
                    raise EnvFailure("the UV provider was not started")
                code = self._process.poll()
                if code is not None:
                    tail = self.log_tail()
                    raise EnvFailure(
                        f"env server `uv run ... uvicorn {self.app}` exited with code "
                        f"{code} before it was ready{_diagnose(tail)}; its output ends "
                        f"with:\n{tail}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{self._base_url}/health").status_code == 200:
                        return
                if time.monotonic() >= deadline:
                    raise EnvFailure(
                        f"env server `uvicorn {self.app}` at {self._base_url} was not ready "
                        f"within {timeout_s:.0f}s (raise task.user.launch_timeout_s if it "
                        f"is just slow); its output ends with:\n{self.log_tail()}"
                    )
                time.sleep(0.2)

    def log_tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        if self._log_path is None:
            return ""
        with contextlib.suppress(OSError):
            return self._log_path.read_text(errors="replace")[-limit:].strip()
        return ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, SIGKILL it after `grace_s`, then remove temp
        files."""
        process, self._process, self._base_url = self._process, None, None
        if process is not None:
            signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=5.0)
            # uv exits once uvicorn has; anything left in the group gets no grace.
            signal_group(process.pid, signal.SIGKILL)
        self._discard_files()

    def _discard_files(self) -> None:
        if self._clone_dir is not None:
            shutil.rmtree(self._clone_dir, ignore_errors=True)
            self._clone_dir = None
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None


_UVICORN_IMPORT = re.compile(r'Could not import module "(?P<module>[^"]+)"')


def _diagnose(tail: str) -> str:
    """Name the usual cause of a crashed start in words the user can act on."""
    if "gradio is hidden from this env server" in tail:
        return " (the env imports gradio: set task.user.server_web_ui = true)"
    if match := _UVICORN_IMPORT.search(tail):
        module = match["module"]
        return (
            f" (ModuleNotFoundError: No module named {module!r}: the `app` module is "
            "not in the env project; check task.user.provider_kwargs.app)"
        )
    return ""


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}
