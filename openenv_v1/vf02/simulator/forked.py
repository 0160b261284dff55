"""A fork: the fork server's child that becomes one launcher's simulator.

It takes over the launcher's streams, environment and directory, and runs
`OpenEnvUser.run()`. Its connection to the launcher is its lifeline: when the
launcher is gone (SIGKILL included), it stops itself. It also dies with the fork
server (verifiers' own parent-death signal).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import socket
import sys
import tempfile
import threading
from typing import Any, NoReturn

from openenv_v1.vf02.simulator.forks import SIMULATOR_MODULE, STOP_GRACE_S, send

__all__ = ["run_fork", "simulator_pid"]

_launcher: int | None = None
"""In a fork: the pid of its launcher."""


def simulator_pid() -> int:
    """The pid of the simulator process verifiers started and owns: the launcher of
    this fork, or this process when it runs the simulator itself. That process
    exits last (a launcher waits for its fork)."""
    return _launcher if _launcher is not None else os.getpid()


def run_fork(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> NoReturn:
    """In the fork: become the launcher's simulator, run it, report its exit code."""
    global _launcher
    code = 1
    try:
        _launcher = int(request["launcher"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.environ.clear()
        os.environ.update(request["environ"])
        os.chdir(request["cwd"])
        sys.argv = list(request["argv"])
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        tempfile.tempdir = None  # TMPDIR is the rollout's
        import random

        random.seed()
        conn.settimeout(None)
        send(conn, {"pid": os.getpid()})
        threading.Thread(target=_lifeline, args=(conn,), daemon=True).start()
        importlib.import_module(SIMULATOR_MODULE).OpenEnvUser.run()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            send(conn, {"exit": code})
        os._exit(code)


def _lifeline(conn: socket.socket) -> None:
    """Stop this fork when its launcher is gone: SIGTERM (the simulator closes its
    env session), then SIGKILL after `STOP_GRACE_S`."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(STOP_GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)
