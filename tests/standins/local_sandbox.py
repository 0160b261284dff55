"""A cloud sandbox stood in for by local processes, for testing OpenEnv's cloud
providers at their boundary: their SDK's sandbox object is replaced, their own code
runs unchanged.

`LocalSandbox` answers the shell commands OpenEnv's providers send into a sandbox:
the `openenv.yaml` lookups, the `nohup bash -c CMD ... &` server start (which starts
a real local OpenEnv server: `OPENENV_V1_STANDIN_APP`, default the local Wordle app,
served by uvicorn on 127.0.0.1 from this interpreter or `OPENENV_V1_STANDIN_PYTHON`,
with the sandbox's environment),
and the `kill -0` liveness probe. With `tls`, the server speaks HTTPS (the providers
that insist on https/wss URLs). `kill()` stops the server.

The server is forked by a thread that waits on it and carries a parent-death signal
tied to that thread, so it ends with the test process however that ends.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

DEFAULT_APP = "wordle_env.server.app:app"
OPENENV_YAML = "spec_version: 1\nname: wordle_env\napp: wordle_env.server.app:app\n"
SERVER_MARK = "openenv-v1-standin-sandbox"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_thread() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class LocalSandbox:
    """One sandbox: a port chosen now, a server once the provider starts one."""

    def __init__(
        self, env: dict[str, str] | None = None, tls: tuple[str, str] | None = None
    ) -> None:
        self.env = dict(env or {})
        self.tls = tls
        self.port = free_port()
        self.commands: list[str] = []
        self.server_command: str | None = None
        self._proc: subprocess.Popen | None = None
        self._started = threading.Event()
        # `kill` may come while `serve` starts the process (a cancelled launch):
        # one lock orders the two, so no server starts after its sandbox is killed.
        self._lock = threading.Lock()
        self.killed = False

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    def exec(self, command: str) -> str:
        """What the sandbox's shell would print for `command`."""
        self.commands.append(command)
        if command.startswith("nohup bash -c "):
            self.server_command = shlex.split(command[len("nohup bash -c ") :])[0]
            self.serve()
            return ""
        if command.startswith("kill -0"):
            alive = self._proc is not None and self._proc.poll() is None
            return "RUNNING" if alive else "DEAD"
        if command.startswith("test -f /app/env/openenv.yaml"):
            return "found"
        if command.startswith("cat /app/env/openenv.yaml"):
            return OPENENV_YAML
        return ""

    def serve(self) -> None:
        """Start the sandbox's server (as its image's server command would)."""
        python = os.environ.get("OPENENV_V1_STANDIN_PYTHON") or sys.executable
        app = os.environ.get("OPENENV_V1_STANDIN_APP") or DEFAULT_APP
        cmd = [python, "-m", "uvicorn", app, "--host", "127.0.0.1"]
        cmd += ["--port", str(self.port), "--log-level", "warning"]
        cmd += ["--timeout-graceful-shutdown", "1"]
        if self.tls:
            cmd += ["--ssl-certfile", self.tls[0], "--ssl-keyfile", self.tls[1]]
        env = {**os.environ, **self.env, "OPENENV_V1_STANDIN": SERVER_MARK}

        def own() -> None:
            with self._lock:
                if self.killed:
                    self._started.set()
                    return
                proc = self._proc = subprocess.Popen(
                    cmd,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_die_with_thread,
                    stdin=subprocess.DEVNULL,
                )
            self._started.set()
            proc.wait()

        threading.Thread(target=own, name="standin-sandbox", daemon=True).start()
        self._started.wait(30)

    def kill(self) -> None:
        with self._lock:
            self.killed = True
            proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def self_signed_cert(directory: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and its key, made with `openssl`."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
        + ["-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)
