"""What a UV launch's server process runs, each time it starts.

- `server_base_env`: an allow-list, not the launcher's environment (`server_env`),
  the prepared environment (`UV_PROJECT_ENVIRONMENT`), and the env's folder on the
  import path (`PYTHONPATH`), as OpenEnv's Dockerfiles run it;
- `server_command`: `uv run --project P -- uvicorn APP ...`, or the prepared
  environment's own uvicorn when the project is unchanged since (`uv_prepared`),
  with a `gradio` that refuses to import ahead on the path when gradio is hidden;
- `ServerOutput`: a temp file unlinked as soon as it is open, so nothing is left
  however either side ends, whose tail a failure quotes.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from openenv_v1.core.launch.server_env import server_environ
from openenv_v1.core.launch.uv_prepared import prepared_uvicorn

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_project import EnvProject

__all__ = [
    "LOG_TAIL_CHARS",
    "NO_GRADIO_DIR",
    "ServerOutput",
    "ServerSpec",
    "server_base_env",
    "server_command",
]

LOG_TAIL_CHARS = 2000
NO_GRADIO_DIR = str(Path(__file__).parents[1] / "no_gradio")
"""Holds a `gradio` package that refuses to import (see no_gradio/gradio/__init__.py)."""


@dataclass(frozen=True)
class ServerSpec:
    """uvicorn's part of one start: the app, where it binds, how it runs."""

    app: str
    host: str
    port: int
    workers: int = 1
    reload: bool = False
    hide_gradio: bool = False

    def uvicorn_args(self) -> list[str]:
        """`uvicorn APP --host H --port P --workers N [--reload]`."""
        args = ["uvicorn", self.app, "--host", self.host, "--port", str(self.port)]
        return (
            args
            + ["--workers", str(self.workers)]
            + (["--reload"] if self.reload else [])
        )


def server_base_env(
    project: EnvProject, env_vars: Mapping[str, str], env_dir: Path
) -> dict[str, str]:
    """The environment of every start of `project`'s server."""
    env = server_environ(env_vars)
    env["UV_PROJECT_ENVIRONMENT"] = str(env_dir)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(project.path), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def server_command(
    spec: ServerSpec, project: EnvProject, env_dir: Path, env: Mapping[str, str]
) -> tuple[list[str], dict[str, str], bool]:
    """The command of one start, its environment, and whether it runs the prepared
    environment's uvicorn without uv."""
    env = dict(env)
    if spec.hide_gradio:
        env["PYTHONPATH"] = f"{NO_GRADIO_DIR}{os.pathsep}{env['PYTHONPATH']}"
    server = spec.uvicorn_args()
    prepared = prepared_uvicorn(env_dir, project.path)
    if prepared is None:
        command = ["uv", "run", "--project", str(project.path), "--", *server]
        return command, env, False
    env["VIRTUAL_ENV"] = str(env_dir)
    env["PATH"] = os.pathsep.join([str(prepared.parent), env.get("PATH", "")])
    return [str(prepared), *server[1:]], env, True


class ServerOutput:
    """A server's output: written through `fd` (close it once the server started),
    its `tail` read here until `close`."""

    def __init__(self, fd: int, log: BinaryIO) -> None:
        self.fd = fd
        self._log: BinaryIO | None = log

    @classmethod
    def open(cls) -> ServerOutput:
        fd, path = tempfile.mkstemp(prefix="openenv-uv-", suffix=".log")
        try:
            log = open(path, "rb")  # closed by close()
        except OSError:
            os.close(fd)
            raise
        finally:
            os.unlink(path)
        return cls(fd, log)

    def close_writer(self) -> None:
        """Close the server's end (its process holds its own copy)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def tail(self, limit: int = LOG_TAIL_CHARS) -> str:
        """The last `limit` characters written, stripped; "" once closed."""
        log = self._log
        if log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):  # ValueError: closed meanwhile
            # The last `limit` characters lie within the last 4 * `limit` bytes.
            size = os.fstat(log.fileno()).st_size
            data = os.pread(log.fileno(), 4 * limit, max(0, size - 4 * limit))
            return data.decode(errors="replace")[-limit:].strip()
        return ""

    def close(self) -> None:
        self.close_writer()
        if self._log is not None:
            self._log.close()
            self._log = None
