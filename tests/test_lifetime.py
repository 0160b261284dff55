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


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_a_killed_test_run_leaves_none_of_its_processes(tmp_path, sig):
    pids_file = tmp_path / "pids.json"
    env = {**os.environ, "LIFETIME_PROBE_PIDS": str(pids_file)}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += ["tests/lifetime_probe.py"]
    run = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + 120
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
