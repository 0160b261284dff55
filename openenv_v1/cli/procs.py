"""Processes the `openenv-v1` command starts, each owned by it: started and stopped
as every launch's are (`core/launch/process_group`'s `start_group`, `stop_group`), so
even a SIGKILLed `openenv-v1` leaves nothing running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from openenv_v1.core.launch.process_group import (
    proc_stats,
    signal_group,
    start_group,
    stop_group,
)
from openenv_v1.core.launch.readiness import ServerGone, wait_ready


class OwnedProcess:
    """A child process leading its own process group, stopped by `stop()`."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        log_path: Path | None = None,
        env: dict[str, str] | None = None,
        stop_signal: int = signal.SIGTERM,
        grace_s: float = 10.0,
    ) -> None:
        """Start `command`, its output to `log_path` when given, else to this
        command's own (a progress display the user should see)."""
        self.name = name
        self.log_path = log_path
        self.stop_signal = stop_signal
        self.grace_s = grace_s
        with log_path.open("wb") if log_path else contextlib.nullcontext() as log:
            self.popen = start_group(
                command,
                stdout=log,
                stderr=subprocess.STDOUT if log else None,
                env=env,
            )

    def poll(self) -> int | None:
        return self.popen.poll()

    def log_tail(self, limit: int = 2000) -> str:
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-limit:].strip()
        return ""

    def stop(self, hurry: Callable[[], bool] = lambda: False) -> int | None:
        """`stop_signal` to the group, up to `grace_s` (less once `hurry()` turns
        true), then SIGKILL (`stop_group`); the exit code."""
        return stop_group(
            self.popen, grace_s=self.grace_s, stop_signal=self.stop_signal, hurry=hurry
        )


def child_group_leaders() -> list[int]:
    """Live direct children of this process that lead their own process group (as
    OpenEnv's UV provider starts `uv`)."""
    me = os.getpid()
    return [
        stat.pid
        for stat in proc_stats()
        if stat.ppid == me and stat.pgrp == stat.pid and stat.state != "Z"
    ]


def stop_child_groups(sig: int = signal.SIGTERM) -> list[int]:
    """Signal the process groups led by this command's children; returns their ids."""
    leaders = child_group_leaders()
    for pid in leaders:
        signal_group(pid, sig)
    return leaders


def reap_child_groups(grace_s: float = 5.0) -> None:
    """Last line of defence on exit: stop any child process group still running (a
    launch interrupted at the wrong instant can leave one)."""
    leaders = stop_child_groups(signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while leaders and time.monotonic() < deadline:
        time.sleep(0.1)
        leaders = child_group_leaders()
    for pid in leaders:
        signal_group(pid, signal.SIGKILL)


def wait_until_serving(owned: OwnedProcess, url: str, timeout_s: float) -> None:
    """Poll `url` until it answers below 500; raise `RuntimeError` with the process's
    output tail if it exits first or does not answer within `timeout_s`."""
    try:
        wait_ready(
            url,
            timeout_s=timeout_s,
            running=lambda: owned.poll() is None,
            answers=lambda status: status < 500,
            not_ready=lambda: RuntimeError(
                f"{owned.name} did not serve {url} within {timeout_s:.0f}s; its "
                f"output ends with:\n{owned.log_tail()}"
            ),
        )
    except ServerGone:
        raise RuntimeError(
            f"{owned.name} exited with code {owned.poll()} before serving {url}; "
            f"its output ends with:\n{owned.log_tail()}"
        ) from None
