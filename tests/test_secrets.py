"""`forward_env`: values reach the launched env server, and nowhere else."""

import json
import secrets
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests import zygote
from tests.servers import (
    eval_environ,
    policy_server,
    processes_matching,
    wordle_uv_eval_command,
    wordle_uv_servers,
)

NAME = "OPENENV_V1_TEST_API_KEY"


def server_environ_values(name: str) -> set[str]:
    """Values of `name` in the environment of live UV-launched Wordle servers."""
    found = set()
    for pid, _ in wordle_uv_servers():
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        for entry in raw.split(b"\0"):
            key, _, value = entry.decode(errors="replace").partition("=")
            if key == name:
                found.add(value)
    return found


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-rollout"])
def test_forwarded_secret_reaches_the_server_but_no_file(tmp_path, shared):
    value = f"sk-test-{secrets.token_hex(8)}"
    seen: set[str] = set()
    with policy_server("slow", delay=2) as policy:
        proc = zygote.start(
            wordle_uv_eval_command(
                policy,
                '[{"seed": 1}]',
                "--taskset.shared-servers",
                str(shared).lower(),
                "--taskset.task.user.forward-env",
                json.dumps([NAME]),
            ),
            cwd=tmp_path,
            env=eval_environ({NAME: value}),
            output=subprocess.PIPE,
        )
        # Drain the output while watching the servers' environments.
        output: list[str] = []
        readers = [
            threading.Thread(target=lambda s=s: output.append(s.read()))
            for s in (proc.stdout, proc.stderr)
        ]
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= server_environ_values(NAME)
            time.sleep(0.2)
        proc.wait(10)
        for reader in readers:
            reader.join(10)
    assert proc.returncode == 0, output
    assert seen == {value}
    (traces,) = tmp_path.glob("outputs/*/*/traces.jsonl")
    run_dir = traces.parent
    assert (run_dir / "config.toml").exists()
    assert NAME in (run_dir / "config.toml").read_text()  # the name is saved
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert value not in path.read_text(errors="replace"), path
    assert all(value not in text for text in output)
    assert processes_matching(value) == []
