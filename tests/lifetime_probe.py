"""Run only by tests/test_lifetime.py, as a pytest run of its own: starts what a real
test run starts (a session-scoped env server, a server process with a request
pending: the local policy's command in `slow` mode, a plain child process), writes
their pids to `$LIFETIME_PROBE_PIDS`, then waits to be killed. Skipped anywhere
else."""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.servers import serve_on_free_port, stop

PIDS = os.environ.get("LIFETIME_PROBE_PIDS")

pytestmark = pytest.mark.skipif(not PIDS, reason="run by tests/test_lifetime.py")


def listening_pid(url: str) -> int:
    """The pid of the process listening on `url`'s port (from /proc/net/tcp)."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    inodes = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
            inodes.add(fields[9])
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fds = list((proc / "fd").iterdir())
            for fd in fds:
                if os.readlink(fd).removeprefix("socket:[").rstrip("]") in inodes:
                    return int(proc.name)
        except OSError:
            continue
    raise LookupError(f"no process listens on {url}")


def test_wait_to_be_killed(counter_url):
    plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    slow, port = serve_on_free_port(
        lambda port: (
            [sys.executable, "-m", "openenv_v1.local_policy"]
            + ["--mode", "slow", "--delay", "600", "--port", str(port)]
        ),
        "/v1/models",
    )
    policy = f"http://127.0.0.1:{port}/v1"
    try:
        pending = threading.Thread(
            target=httpx.post,
            args=(f"{policy}/chat/completions",),
            kwargs={"json": {"messages": []}, "timeout": 600},
            daemon=True,
        )
        pending.start()
        pids = [listening_pid(counter_url), listening_pid(policy), plain.pid]
        Path(PIDS).write_text(json.dumps(pids))
        threading.Event().wait()
    finally:
        stop(slow)
