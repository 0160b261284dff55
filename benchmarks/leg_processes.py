"""The processes of a `benchmarks/run.py` leg: a server it serves for the length of a
block (`served`), the memory of an eval's process tree (`tree_rss_mb`), and the local
Wordle env servers its evals started (`env_server_pids`, to count those left behind).
Reads `/proc` directly (no psutil)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from scaling.procs import WORDLE_APP, WORDLE_PROJECT, free_port, tree_rss_mb

__all__ = ["env_server_pids", "free_port", "served", "tree_rss_mb"]


@contextlib.contextmanager
def served(cmd: list[str], health: str) -> Iterator[None]:
    """A server process in its own group, stopped (the whole group) on exit."""
    proc = subprocess.Popen(
        cmd,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{cmd} exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(health, timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{health} not up")
            time.sleep(0.1)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        proc.wait(10)


def env_server_pids(workdir: Path) -> set[int]:
    """Live processes serving this checkout's local Wordle env (uv runs and uvicorns)
    that this benchmark's evals started: named by their command line, or running in
    the env's folder or the eval's working directory (other checkouts' servers on
    the machine are not counted)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                if WORDLE_APP not in cmd or "uvicorn" not in cmd:
                    continue
                cwd = os.readlink(entry / "cwd")
                ours = str(WORDLE_PROJECT) in cmd or cwd.startswith(
                    (str(WORDLE_PROJECT), str(workdir))
                )
                if ours:
                    pids.add(int(entry.name))
    return pids
