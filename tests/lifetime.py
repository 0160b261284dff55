"""Every process the tests start dies with the test run, however the run ends.

Fixture finalizers stop the tests' servers and policies when a run ends normally or
on Ctrl-C. A SIGTERM (a CI timeout, `kill`) or SIGKILL (`kill -9`, the OOM killer)
runs no finalizer, and the servers lead process groups of their own, so nothing
else reaches them. `bind_children_to_this_run()` (called once, in this pytest
process) covers those two ends:

- Every child the pytest process forks from its main thread asks the kernel for
  SIGKILL when pytest dies (a parent-death signal): `subprocess.Popen`, and so
  `subprocess.run` and asyncio's subprocesses, get `die_with_the_run` as
  `preexec_fn` unless the caller gives its own. Only main-thread forks: the kernel
  sends the signal when the *thread* that forked the child ends, so a child forked
  by a worker thread would die with that thread.
- On SIGTERM, pytest first SIGKILLs every such child still running, with its whole
  process group when it leads one (a server and whatever it spawned), then dies of
  the SIGTERM as it would have.

What the children spawn themselves is theirs to stop: the `openenv-v1` and `eval`
commands give their own children a parent-death signal (openenv_v1.core.launch.process_group).
Under pytest-xdist each worker is such a pytest process, and dies with the controller.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import weakref
from types import FrameType

_PR_SET_PDEATHSIG = 1

_children: weakref.WeakSet[subprocess.Popen] = weakref.WeakSet()
_bound = False


def die_with_the_run() -> None:
    """A `preexec_fn`: runs in the child between fork and exec and asks the kernel for
    SIGKILL when the thread that forked it (pytest's main thread) ends."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def bind_children_to_this_run(xdist_worker: bool = False) -> None:
    """Make every later main-thread child of this process die with it (see the module
    docstring); an `xdist_worker` also dies with its controller. Idempotent."""
    global _bound
    if _bound:
        return
    _bound = True
    original_init = subprocess.Popen.__init__

    def init(self: subprocess.Popen, *args, **kwargs) -> None:
        main = threading.current_thread() is threading.main_thread()
        if main and kwargs.get("preexec_fn") is None:
            kwargs["preexec_fn"] = die_with_the_run
        original_init(self, *args, **kwargs)
        _children.add(self)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    signal.signal(signal.SIGTERM, _kill_children_then_die)
    if xdist_worker:
        _die_with_parent()


def kill_children() -> None:
    """SIGKILL every child started through `subprocess.Popen` that has not been
    reaped, with its process group when it leads one."""
    for child in list(_children):
        if child.returncode is not None:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if os.getpgid(child.pid) == child.pid:
                os.killpg(child.pid, signal.SIGKILL)
            else:
                os.kill(child.pid, signal.SIGKILL)


def _kill_children_then_die(signum: int, _frame: FrameType | None) -> None:
    kill_children()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _die_with_parent() -> None:
    """An xdist worker: SIGTERM (so the handler above runs) when the controller dies."""
    parent = os.getppid()
    ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the controller died before the call
        os.kill(os.getpid(), signal.SIGTERM)
