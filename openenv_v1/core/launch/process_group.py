"""Owning a child process tree: a process group per child, a parent-death signal.

Imports nothing heavy, so both the launcher and the `openenv-v1` command use it.
"""

from __future__ import annotations

import contextlib
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_owner() -> None:
    """A `preexec_fn`: runs in the child between fork and exec and asks the kernel for
    SIGTERM when the thread that forked it dies. Fork from a thread that lives as long
    as the child should."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def process_running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie, exited but not yet
    reaped by its parent, has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
