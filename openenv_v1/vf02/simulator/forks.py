"""Start each verifiers 0.2 user simulator as a fork of one that has imported it all.

verifiers 0.2 runs `python -m openenv_v1.vf02.user` once per rollout, and a fresh
interpreter spends seconds of CPU importing verifiers, mcp's server, uvicorn and
OpenEnv's client before it serves. So each process that runs rollouts owns one *fork
server* (`SimulatorForks`, here), which imports all that once, and each rollout's
simulator command only asks it for a fork. Three processes, a module each:

the **launcher** (`launcher.py`, the process verifiers starts and owns), the **fork
server** (`fork_server.py`, which exits within a second of its owner however that
ends) and the **fork** (`forked.py`, the launcher's simulator).

The socket lives in a directory only this user can open, and the fork server forks
only for a launcher that brings its per-eval token (`simulator_forks_token` in the
config), which it got on its standard input, never in its arguments or environment.
It runs without the eval's credentials in its environment and is non-dumpable
(`server_env.hide_this_process`), as are its forks: code in an env server, running as
the same user, cannot read their state channel secrets. Linux only (fork, passing
file descriptors); elsewhere simulators start as before.

    forks = SimulatorForks.reserve()        # the taskset: a socket path
    forks.launch()                          # ... and the server, importing meanwhile
    user = user.model_copy(update={"simulator_forks": forks.socket_path})
    await forks.started()                   # each rollout's setup: until it listens
    forks.close()
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from openenv_v1.core.launch.process_group import start_group, stop_group
from openenv_v1.core.launch.server_env import without_credentials

__all__ = ["OWNER_VAR", "STOP_GRACE_S", "SimulatorForks", "supported"]

SIMULATOR_MODULE = "openenv_v1.vf02.user"
"""The module verifiers runs as each rollout's simulator (`python -m`): the fork server
imports it once, and each fork runs its `OpenEnvUser`. Named, not imported: the
binding imports this machinery, never the other way round."""
STOP_GRACE_S = 10.0
"""How long a fork told to stop (or orphaned) may take to close its env session."""
BIND_TIMEOUT_S = 30.0
"""Longest `SimulatorForks.ensure_started()` waits for the fork server's socket."""
OWNER_VAR = "OPENENV_V1_SIMULATOR_OWNER"
"""Set by the process that runs rollouts to its pid, and so inherited by each
launcher verifiers starts there: a launcher with another parent was orphaned
before it could look, and leaves."""
HEADER = struct.Struct("!I")
"""A request's length, before it: the launcher's JSON request to the fork server."""
STREAMS = 3
"""File descriptors a launcher hands over: stdin, stdout, stderr."""


def supported() -> bool:
    """Whether simulators can be forked on this platform."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


def send(conn: socket.socket, message: dict[str, Any]) -> None:
    """One JSON line of the fork server's or a fork's to a launcher."""
    conn.sendall(json.dumps(message).encode() + b"\n")


@dataclass
class SimulatorForks:
    """The fork server of one process that runs rollouts, and its socket. The
    socket's path is chosen when the taskset is built (it goes into every
    simulator's config), and the server is launched then too (`launch()`); each
    rollout waits until it listens (`started()`)."""

    socket_path: str
    _dir: str = field(repr=False)
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    """What a launcher must bring (the simulators' config carries it)."""
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _listening: bool = field(default=False, repr=False)
    """Whether `ensure_started()` has seen the socket (or given up on it)."""

    @classmethod
    def reserve(cls) -> SimulatorForks:
        """A socket path in a directory only this user can open; no process yet."""
        home = tempfile.mkdtemp(prefix="openenv-v1-forks-")
        if len(home) > 90:  # a unix socket path has room for ~107 bytes
            shutil.rmtree(home, ignore_errors=True)
            home = tempfile.mkdtemp(prefix="openenv-v1-forks-", dir="/tmp")
        forks = cls(os.path.join(home, "forks.sock"), home)
        atexit.register(forks.close)
        return forks

    @classmethod
    def start(cls) -> SimulatorForks:
        """`reserve()`, then the server started at once."""
        forks = cls.reserve()
        forks.ensure_started()
        return forks

    async def started(self) -> None:
        """`ensure_started()` from a rollout's setup, off the event loop until the
        server listens (a no-op afterwards). Marks this process as the owner of the
        launchers it starts from here on (`OWNER_VAR`)."""
        os.environ[OWNER_VAR] = str(os.getpid())
        if not self._listening:
            await asyncio.to_thread(self.ensure_started)

    def launch(self) -> None:
        """Start the fork server (once) and return at once: it imports while this
        process goes on (the taskset launches it as it is built, so the imports
        overlap the eval's own start-up). The token goes on its standard input, the
        environment `without_credentials`; its session holds its forks. Stopped by
        `close()`, at exit, or when this process dies."""
        with self._lock:
            if self._proc is not None:
                return
            # No parent-death signal: this may run on a worker thread, which ends
            # long before the eval; the fork server watches its owner's pid instead.
            proc = start_group(
                [sys.executable, "-m", "openenv_v1.vf02.simulator.fork_server"]
                + [self.socket_path, str(os.getpid())],
                stdin=subprocess.PIPE,
                env=without_credentials(os.environ),
                owner_death=False,
            )
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.write(self.token.encode() + b"\n")
                proc.stdin.close()
            self._proc = proc

    def ensure_started(self) -> None:
        """`launch()`, then wait until the server listens (at most
        `BIND_TIMEOUT_S`; it binds before it imports, and launchers queue on its
        socket meanwhile)."""
        self.launch()
        with self._lock:
            if self._listening:
                return
            # A launcher that finds no socket at all starts its simulator itself.
            assert self._proc is not None
            deadline = time.monotonic() + BIND_TIMEOUT_S
            while not os.path.exists(self.socket_path) and self._proc.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            self._listening = True

    def close(self) -> None:
        """Stop the fork server and every fork still running; remove the socket."""
        atexit.unregister(self.close)
        with self._lock:
            if self._proc is not None:
                # Its group holds the forks the server left behind: all go.
                stop_group(self._proc, grace_s=STOP_GRACE_S)
        shutil.rmtree(self._dir, ignore_errors=True)
