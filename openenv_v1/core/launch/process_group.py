"""Owning a child process tree: a process group per child, a parent-death signal,
and the one reader of `/proc/<pid>/stat` (`proc_stat`, `proc_stats`).

Imports nothing heavy, so both the launcher and the `openenv-v1` command use it.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

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


@dataclass(frozen=True)
class ProcStat:
    """A process as `/proc/<pid>/stat` shows it (the fields after its command name,
    which may hold spaces and parentheses)."""

    pid: int
    state: str
    """`Z` for a zombie: exited, not yet reaped by its parent."""
    ppid: int
    pgrp: int
    rss_pages: int


def proc_stat(pid: int) -> ProcStat:
    """Process `pid`'s stat; `FileNotFoundError` when there is no such process, another
    `OSError` where there is no `/proc`."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), int(fields[21]))


def proc_stats() -> Iterator[ProcStat]:
    """Every process `/proc` lists that is still there when read (none without
    `/proc`)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for name in names:
        if not name.isdigit():
            continue
        try:
            stat = proc_stat(int(name))
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        yield stat


def process_running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie, exited but not yet
    reaped by its parent, has)."""
    try:
        return proc_stat(pid).state != "Z"
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
