"""A child forked from this process now, while it is single-threaded, to run later.

A fresh simulator fork server (`forks.SimulatorForks`) spends ~2 s of CPU importing
verifiers, mcp's server, uvicorn and OpenEnv's client, once per eval. The eval holds
most of that when it builds its taskset, and has one thread then (its pool, event
loop and workers start after). So the taskset forks the fork server there
(`Prefork.fork`); the child waits on a pipe until the first rollout hands it what it
runs with (`Prefork.go`), then runs `forks.serve` as a fresh one would.

A fork carries its parent's state, so the child first drops what the eval set up
that a fresh interpreter started by it would not have, and that its own forks (the
simulators) would otherwise carry on with:

- exit handlers (the eval's `close()`s, which remove the socket and stop its env
  servers), and the eval's signal handlers (back to what an executed program gets);
- the eval's log routing: verifiers' CLI sends the `verifiers.v1` logger to the
  console and the run's `eval.log`, and the taskset sends `openenv_v1.*` there too
  (`openenv_v1.logs`); a fresh process has neither (`verifiers.v1` is silent,
  `openenv_v1.*` warnings reach stderr);
- its standard input (now `/dev/null`), its session (a session of its own, as
  `start_new_session` gives) and its name (`/proc/PID/comm`: `PROCESS_NAME`, since
  its command line stays the eval's; its forks inherit both).

It keeps the eval's memory (which holds the eval's credentials) and, like the eval
(`server_env.hide_this_process`), is non-dumpable: other processes of the user cannot
read it. Only a process with one thread and no event loop running is forked
(`forkable_now`): a fork keeps only the forking thread, and a lock another thread
held, or a loop in use, would stay so for good. Linux only.

    if forkable_now():
        ahead = Prefork.fork(run)        # run(message) in the child, later
    proc = ahead.go({"socket": path})   # a handle with pid/poll/wait, or None
    ahead.discard()                     # never asked: it exits
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from openenv_v1.core.launch.process_group import thread_count
from openenv_v1.core.launch.server_env import hide_this_process
from openenv_v1.logs import OUR_LOGGER, VERIFIERS_LOGGER

__all__ = ["PROCESS_NAME", "Forked", "Prefork", "forkable_now"]

PROCESS_NAME = "openenv-v1-fork"
"""The name (`/proc/PID/comm`) of a fork server forked from its eval, and of its
forks (at most 15 bytes)."""
_PR_SET_NAME = 15
_asking: set[int] = set()
"""This process's ends of its preforks' pipes (a later prefork closes its copies)."""


def forkable_now() -> bool:
    """Whether this process can be forked soundly now: Linux, on its main thread and
    the only one (native threads counted), no event loop running in it."""
    if threading.current_thread() is not threading.main_thread():
        return False
    threads = thread_count()
    if threads is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return threads == 1 and hasattr(os, "fork")
    return False


class Prefork:
    """This process's side of one child forked ahead (see the module docstring)."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid = pid
        self._pipe: int | None = pipe

    @classmethod
    def fork(cls, run: Callable[[dict[str, Any]], None]) -> Prefork:
        """Fork the child now (check `forkable_now()` first). It waits until `go`
        hands it a message, then runs `run(message)` and exits (1 on an exception,
        with its traceback on stderr); it exits at once if this process closes the
        pipe first (`discard`, or this process's end)."""
        ask, asking = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # else the child writes it again
            if stream is not None:
                stream.flush()
        pid = os.fork()
        if pid == 0:
            for fd in (asking, *_asking):
                os.close(fd)
            _wait_then_run(ask, run)
        os.close(ask)
        _asking.add(asking)
        return cls(pid, asking)

    def go(self, message: dict[str, Any]) -> Forked | None:
        """Hand the child `message` (once); its handle, or None if it is gone."""
        pipe, self._pipe = self._pipe, None
        if pipe is None:
            return None
        _asking.discard(pipe)
        try:
            with open(pipe, "wb") as out:
                out.write(json.dumps(message).encode())
        except OSError:  # it died meanwhile (a broken pipe)
            Forked(self.pid).wait()
            return None
        return Forked(self.pid)

    def discard(self) -> None:
        """Never asked: close the pipe (the child exits) and reap the child."""
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            _asking.discard(pipe)
            os.close(pipe)
            Forked(self.pid).wait()


class Forked:
    """What `SimulatorForks` uses of a `subprocess.Popen` (`pid`, `poll`, `wait`),
    for a child forked by this process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else: gone
                self.returncode = 0
            else:
                if done:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            time.sleep(0.01)
        return self.returncode  # type: ignore[return-value]


def _wait_then_run(ask: int, run: Callable[[dict[str, Any]], None]) -> NoReturn:
    """The child: drop the parent's setup, wait for the message, run."""
    code = 1
    try:
        os.setsid()
        _forget_the_parent()
        with open(ask, "rb") as pipe:
            message = pipe.read()
        if message:
            run(json.loads(message))
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def _forget_the_parent() -> None:
    """What a fresh interpreter would not have of the parent (the module docstring)."""
    hide_this_process()
    atexit._clear()  # the parent's handlers; there is no public way to drop them
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as Python starts
    for name in (OUR_LOGGER, VERIFIERS_LOGGER):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
    logging.getLogger(VERIFIERS_LOGGER).addHandler(logging.NullHandler())
    if logging.lastResort is None:  # verifiers' `--rich` dashboard drops it
        logging.lastResort = logging.StreamHandler()
        logging.lastResort.setLevel(logging.WARNING)
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_NAME, PROCESS_NAME.encode(), 0, 0, 0)
