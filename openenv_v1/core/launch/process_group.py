"""Owning a child process tree, and the one reader of `/proc`.

A child this package starts leads a session of its own, so signalling its group
reaches whatever it spawned, and may get SIGTERM when the thread that started it
dies (`die_with_owner`). `start_group` starts one; `stop_group` ends it: a stop
signal, a grace, then SIGKILL to the group. `/proc` is read only here (the Docker reaper, a
stdlib-only script, reads its own).

    child = start_group(["uv", "run", ...], stdout=log, cwd=project)
    stop_group(child, grace_s=10.0)   # SIGTERM, 10 s, SIGKILL to the group
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

__all__ = [
    "Child",
    "ProcStat",
    "available_memory",
    "die_with_owner",
    "proc_stat",
    "proc_stats",
    "process_running",
    "signal_group",
    "start_group",
    "stop_group",
]

_PR_SET_PDEATHSIG = 1
_KILLED_WAIT_S = 5.0
"""How long a group's leader may take to be reaped once SIGKILLed."""


def die_with_owner() -> None:
    """A `preexec_fn` asking the kernel for SIGTERM when the thread that forked the
    child dies (fork from a thread that lives as long as the child should)."""
    import ctypes

    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def signal_group(pgid: int, sig: int) -> None:
    """Send `sig` to a process group; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class Child(Protocol):
    """What `stop_group` uses of a child (a `subprocess.Popen`)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def start_group(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdin: int | IO[bytes] | None = subprocess.DEVNULL,
    stdout: int | IO[bytes] | None = None,
    stderr: int | IO[bytes] | None = None,
    owner_death: bool = True,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start `command` as the leader of a session of its own; with `owner_death`,
    SIGTERMed when the starting thread dies; `pass_fds` left open in it. `OSError`
    when it cannot run."""
    return subprocess.Popen(
        list(command),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,
        preexec_fn=die_with_owner if owner_death else None,
        pass_fds=tuple(pass_fds),
    )


def stop_group(
    child: Child,
    *,
    grace_s: float,
    stop_signal: int = signal.SIGTERM,
    hurry: Callable[[], bool] | None = None,
) -> int | None:
    """End the process group `child` leads: `stop_signal` while its leader runs,
    up to `grace_s` for it to exit (less once `hurry()`), then SIGKILL to whatever
    is left. Returns the leader's exit code (None if not reaped in time)."""
    if child.poll() is None:
        signal_group(child.pid, stop_signal)
        deadline = time.monotonic() + grace_s
        while child.poll() is None and time.monotonic() < deadline:
            if hurry is not None and hurry():
                break
            step = deadline - time.monotonic()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=max(0.0, min(step, 0.2 if hurry else step)))
    signal_group(child.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        return child.wait(timeout=_KILLED_WAIT_S)
    return None


@dataclass(frozen=True)
class ProcStat:
    """A process as `/proc/<pid>/stat` shows it."""

    pid: int
    state: str  # `Z`: a zombie
    ppid: int
    pgrp: int
    rss_pages: int
    cpu_ticks: int
    """User and system time, in clock ticks."""


def proc_stat(pid: int) -> ProcStat:
    """Process `pid`'s stat; `FileNotFoundError` for no such process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    state, ppid, pgrp = fields[0], int(fields[1]), int(fields[2])
    cpu_ticks = int(fields[11]) + int(fields[12])
    return ProcStat(pid, state, ppid, pgrp, int(fields[21]), cpu_ticks)


def proc_stats() -> Iterator[ProcStat]:
    """Every process `/proc` lists that is still there when read."""
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
    """Whether process `pid` exists and has not exited (a zombie has)."""
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


def available_memory() -> int | None:
    """`MemAvailable` of /proc/meminfo in bytes; None where there is none."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None
