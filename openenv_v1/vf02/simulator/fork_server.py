"""The fork server: one process per eval that imports what a simulator runs, once,
and forks a simulator (`forked.py`) for each launcher that brings its token.

    python -m openenv_v1.vf02.simulator.fork_server SOCKET OWNER_PID  # token on stdin
"""

from __future__ import annotations

import contextlib
import hmac
import importlib
import json
import os
import socket
import sys
import threading

from openenv_v1.vf02.simulator.forked import run_fork
from openenv_v1.vf02.simulator.forks import HEADER, SIMULATOR_MODULE, STREAMS, send

__all__ = ["serve"]

OWNER_POLL_S = 1.0
"""How often the fork server checks that its owner is alive."""
REQUEST_TIMEOUT_S = 5.0
"""Longest the fork server waits for a connected launcher's request (it serves one
connection at a time)."""
_MAX_REQUEST = 16 << 20


def _preload() -> None:
    """Import what every simulator imports, once."""
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()
    import httpx  # noqa: F401
    import mcp.server.fastmcp
    import mcp.server.transport_security  # noqa: F401
    import uvicorn  # noqa: F401

    importlib.import_module(SIMULATOR_MODULE)  # verifiers.v1, the core
    from openenv_v1.core.light_import import generic_client_class

    generic_client_class()


def serve(path: str, owner: int) -> None:
    """The fork server's loop: one fork per connection that brings the token read
    from standard input, until its owner (the pid that started it) is gone. An owner
    that died before this process got here (a loaded machine can take seconds to
    start it) is gone already: it does not serve at all."""
    if os.getppid() != owner:
        return
    token = sys.stdin.readline().strip()
    if not token:
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1024)  # launchers queue here while the imports run
    _preload()
    import gc

    gc.freeze()  # forks share the imported objects' pages instead of copying them
    listener.settimeout(OWNER_POLL_S)
    try:
        while os.getppid() == owner:
            _reap_forks()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                _fork_one(listener, conn, token)
            except (OSError, ValueError) as e:
                print(f"openenv-v1 fork server: {e}", file=sys.stderr, flush=True)
            finally:
                conn.close()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _reap_forks() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _fork_one(listener: socket.socket, conn: socket.socket, token: str) -> None:
    conn.settimeout(REQUEST_TIMEOUT_S)
    _, fds, _, _ = socket.recv_fds(conn, 1, STREAMS)
    try:
        if len(fds) != STREAMS:
            raise ValueError(f"expected {STREAMS} streams, got {len(fds)}")
        (size,) = HEADER.unpack(_read_exactly(conn, HEADER.size))
        if size > _MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes")
        request = json.loads(_read_exactly(conn, size))
        if not isinstance(request, dict) or not hmac.compare_digest(
            str(request.get("token", "")).encode(), token.encode()
        ):
            send(conn, {"error": "not authorized"})
            return
        if threading.active_count() > 1:
            # A fork copies only the forking thread; refuse rather than risk a lock
            # held by another one. The launcher then starts the simulator itself.
            send(conn, {"error": "the fork server has threads; cannot fork safely"})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            run_fork(conn, fds, request)
    finally:
        for fd in fds:
            os.close(fd)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("the launcher hung up mid-request")
        data += chunk
    return bytes(data)


if __name__ == "__main__":
    from openenv_v1.core.launch.server_env import hide_this_process

    hide_this_process()  # before the token is read; its forks stay hidden too
    serve(sys.argv[1], int(sys.argv[2]))
