"""The launcher: the simulator process verifiers starts and owns, run as a fork.

Before importing anything heavy, `python -m openenv_v1.vf02.user` hands the fork
server (`simulator_forks` in its config) its environment, working directory,
arguments and standard streams, and waits. It forwards SIGTERM, SIGINT and SIGHUP
to its fork (killed `STOP_GRACE_S` later if still running), and exits with the
fork's exit code. It dies with the eval (a parent-death SIGTERM, passed on to its
fork). With no fork server that answers within `ANSWER_TIMEOUT_S`, it runs the
simulator itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from openenv_v1.core.launch.process_group import die_with_owner
from openenv_v1.vf02.simulator.forks import (
    HEADER,
    OWNER_VAR,
    STOP_GRACE_S,
    STREAMS,
    supported,
)

__all__ = ["run_forked"]

ANSWER_TIMEOUT_S = 60.0
"""Longest a launcher waits for its fork (the fork server may still be importing),
before it runs the simulator itself."""


def socket_from_config() -> tuple[str, str] | None:
    """The fork server's socket and token named in this simulator's config
    (`VF_CONFIG`)."""
    raw = os.environ.get("VF_CONFIG")
    if not raw or not supported():
        return None
    with contextlib.suppress(ValueError, AttributeError):
        config = json.loads(raw)
        path = config.get("simulator_forks")
        token = config.get("simulator_forks_token") or ""
        if isinstance(path, str) and path and isinstance(token, str):
            return path, token
    return None


def run_forked() -> None:
    """Run this simulator as a fork of the configured fork server, and exit with its
    exit code. Returns (having done nothing) when there is no fork server to ask."""
    found = socket_from_config()
    if found is None:
        return
    path, token = found
    # Die with the eval from here on, as verifiers' own simulator does once it
    # serves: a launcher orphaned while it waits must not go on to start a
    # simulator itself (nothing would ever stop that one). One orphaned before this
    # line has another parent than the process that ran its rollout.
    owner = os.getppid()
    die_with_owner()
    expected = os.environ.get(OWNER_VAR)
    if os.getppid() != owner or (expected and expected != str(owner)):
        sys.exit(128 + signal.SIGTERM)
    try:
        lines, pid = _ask_for_fork(path, token)
    except (OSError, ValueError) as e:
        print(
            f"openenv-v1: no simulator fork ({type(e).__name__}: {e}); "
            "starting the simulator in this process",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"openenv-v1: simulator forked as pid {pid}", file=sys.stderr, flush=True)
    code = _relay(lines, pid)
    lines.close()
    _remove_port_file()
    sys.exit(code)


def _remove_port_file() -> None:
    """verifiers has each simulator report its port in a file of its own
    (`MCP_PORT_FILE`, `/tmp/vf-port-<uuid>`), reads it once, and never removes it:
    a file per rollout, left for as long as the machine runs (a trainer's evals
    leave millions). The launcher removes it once its simulator has ended (the port
    was read by then, or never will be)."""
    path = os.environ.get("MCP_PORT_FILE")
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _ask_for_fork(path: str, token: str) -> tuple[_Lines, int]:
    """Hand this process's streams and request to the fork server; returns the
    connection (as lines) and the fork's pid."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ANSWER_TIMEOUT_S)
        conn.connect(path)
        request = json.dumps(
            {
                "environ": dict(os.environ),
                "cwd": os.getcwd(),
                "argv": sys.argv,
                "launcher": os.getpid(),
                "token": token,
            }
        ).encode()
        socket.send_fds(conn, [b"F"], list(range(STREAMS)))
        conn.sendall(HEADER.pack(len(request)) + request)
        lines = _Lines(conn)
        by = time.monotonic() + ANSWER_TIMEOUT_S
        answer = lines.next(lambda: by)
        if answer is None or "pid" not in answer:
            raise ValueError(
                (answer or {}).get("error", "the fork server closed the connection")
            )
        return lines, int(answer["pid"])
    except BaseException:
        conn.close()
        raise


class _Lines:
    """JSON lines from a socket it owns, read with a deadline (polling, so that
    signal handlers run and may move the deadline)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = b""
        conn.settimeout(0.5)

    def next(self, deadline: Callable[[], float | None]) -> dict[str, Any] | None:
        """The next message; None when the peer hung up. `TimeoutError` once past
        `deadline()` (read on every poll; None: no deadline)."""
        while b"\n" not in self._buffer:
            try:
                chunk = self._conn.recv(4096)
            except TimeoutError:
                by = deadline()
                if by is not None and time.monotonic() > by:
                    raise
                continue
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self._conn.close()


def _relay(lines: _Lines, pid: int) -> int:
    """Wait for the fork's exit code, passing stop signals on; a fork still running
    `STOP_GRACE_S` after a stop signal is killed. A fork that ends by the signal it
    was passed (uvicorn re-raises it once shut down) ends the launcher the same way."""
    stops: list[tuple[int, float]] = []  # (signal, deadline) of the first stop

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        if not stops:
            stops.append((signum, time.monotonic() + STOP_GRACE_S))

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            answer = lines.next(lambda: stops[0][1] if stops else None)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return 128 + signal.SIGKILL
        except ValueError:
            continue
        if answer is None:  # the fork died without a word: by a signal
            if not stops:
                return 1
            signal.signal(stops[0][0], signal.SIG_DFL)
            _remove_port_file()
            os.kill(os.getpid(), stops[0][0])
            return 128 + stops[0][0]
        if "exit" in answer:
            return int(answer["exit"])
