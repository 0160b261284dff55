"""verifiers 0.4: `forward_env` values reach the launched env server, and no file."""

import json
import secrets
import subprocess
import threading
import time

import pytest

from tests import zygote
from tests.servers import eval_environ, policy_server, processes_matching
from tests.test_secrets import NAME, server_environ_values
from tests.vf04.evals import vf_eval_command, wordle_uv_flags


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-rollout"])
def test_forwarded_secret_reaches_the_server_but_no_file(tmp_path, shared):
    value = f"sk-test-{secrets.token_hex(8)}"
    seen: set[str] = set()
    with policy_server("slow", delay=2) as policy:
        proc = zygote.start(
            vf_eval_command(
                [
                    *wordle_uv_flags('[{"seed": 1}]'),
                    "--env.taskset.shared-servers",
                    str(shared).lower(),
                    "--env.taskset.forward-env",
                    json.dumps([NAME]),
                    "-m",
                    "local-policy",
                    "--client.base-url",
                    policy,
                    "--client.api-key-var",
                    "LOCAL_POLICY_KEY",
                    "--no-rich",
                ]
            ),
            cwd=tmp_path,
            env=eval_environ({NAME: value}),
            output=subprocess.PIPE,
        )
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
    (traces,) = tmp_path.glob("outputs/*/traces.jsonl")
    run_dir = traces.parent
    saved = "\n".join(
        p.read_text() for p in run_dir.glob("configs/**/*") if p.is_file()
    )
    assert NAME in saved  # the name is saved
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert value not in path.read_text(errors="replace"), path
    assert all(value not in text for text in output)
    assert processes_matching(value) == []
