"""Env servers launched for rollouts never outlive the eval, even a SIGKILLed one."""

import os
import signal
import subprocess
import time

from tests.servers import (
    BIN,
    model_flags,
    policy_server,
    processes_matching,
    wordle_uv_flags,
    wordle_uv_servers,
)


def test_sigkilled_eval_leaves_no_env_server(tmp_path):
    assert wordle_uv_servers() == []
    # A slow policy keeps both episodes in flight while the eval is killed.
    with policy_server("slow", delay=120) as policy:
        eval_proc = subprocess.Popen(
            [
                str(BIN / "eval"),
                *wordle_uv_flags('[{"seed": 1}, {"seed": 2}]'),
                "--harness.id",
                "null",
                "--no-push",
                *model_flags(policy),
            ],
            cwd=tmp_path,
            env={**os.environ, "LOCAL_POLICY_KEY": "local"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 180
            while len(wordle_uv_servers()) < 2 and time.monotonic() < deadline:
                assert eval_proc.poll() is None, "eval ended before the envs were up"
                time.sleep(0.5)
            assert len(wordle_uv_servers()) >= 2, "both env servers should be up"
            time.sleep(3)  # let the episodes start
        finally:
            eval_proc.send_signal(signal.SIGKILL)
            eval_proc.wait(10)
        deadline = time.monotonic() + 20
        while wordle_uv_servers() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert wordle_uv_servers() == []
        assert processes_matching("openenv_v1.user") == []
