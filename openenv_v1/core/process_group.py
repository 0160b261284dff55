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
