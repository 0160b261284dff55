"""Nothing a test run started outlives it: a pytest run killed in the middle (SIGTERM,
SIGKILL) takes its session-scoped env server, a policy with a reply pending and a
plain child process with it (tests/lifetime.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.servers import ROOT


def alive(pid: int) -> bool:
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        return False
    return "\nState:\tZ" not in status


@pytest.mark.parametrize(
    ("sig", "flags"),
    [
        (signal.SIGTERM, []),
        (signal.SIGKILL, []),
        (signal.SIGTERM, ["-n", "0"]),
    ],
    ids=["term", "kill", "term-one-process"],
)
def test_a_killed_test_run_leaves_none_of_its_processes(tmp_path, sig, flags):
    """The run as configured (pytest-xdist workers), and all in one process."""
    pids_file = tmp_path / "pids.json"
    env = {**os.environ, "LIFETIME_PROBE_PIDS": str(pids_file)}
    env.pop("PYTEST_XDIST_WORKER", None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *flags]
    cmd += ["tests/lifetime_probe.py"]
    run = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 300
        while not pids_file.exists() or not pids_file.read_text():
            assert run.poll() is None, run.stdout.read().decode()[-3000:]
            assert time.monotonic() < deadline, "the probe run never got going"
            time.sleep(0.1)
        pids = json.loads(pids_file.read_text())
        assert len(pids) == 3 and all(alive(pid) for pid in pids)
        run.send_signal(sig)
        assert run.wait(30) == -sig
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [pid for pid in pids if alive(pid)] == []
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
