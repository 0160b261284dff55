"""verifiers 0.4: `openenv-v1 demo` runs the offline Wordle eval through `vf-eval` on
the Wordle env the package ships, served with this environment's Python (openenv-core
0.3), and prints the summary the 0.2 demo prints (tests/test_cli.py)."""

import json

import pytest

from tests.servers import free_port, wordle_uv_servers
from tests.test_cli import gone, run_cli


@pytest.mark.parametrize("tool_calls", ["text", "native"])
def test_demo_runs_vf_eval_on_the_env_it_serves(tmp_path, tool_calls):
    assert wordle_uv_servers() == []
    env_port, policy_port = free_port(), free_port()
    proc = run_cli(
        "demo",
        *("--tool-calls", tool_calls, "--episodes", "2", "--concurrency", "2"),
        *("--env-port", str(env_port), "--policy-port", str(policy_port)),
        cwd=tmp_path,
        timeout=600,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    # The command it ran, as a user would type it.
    (shown,) = [line for line in proc.stderr.splitlines() if "vf-eval " in line]
    url = f"http://127.0.0.1:{env_port}"
    assert f"vf-eval openenv-wordle-v1 --env.taskset.base-url {url} " in shown
    assert ("--env.taskset.tool-calls native" in shown) == (tool_calls == "native")
    assert "episodes      2 of 2 (2 at a time)" in out
    assert "solved        2/2 (reward >= 1)" in out
    assert "mean reward   1.00" in out
    (path,) = tmp_path.glob("outputs/*/traces.jsonl")
    assert f"traces        {path}" in out
    episodes = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(episodes) == 2
    for episode in episodes:
        assert episode["ok"] and episode["errors"] == []
        (trace,) = episode["traces"]
        assert trace["agent"]["config"]["harness"]["id"] == "openenv-wordle-v1"
        assert trace["rewards"]["openenv_reward"]["score"] == 1.0
        calls = [
            call["name"]
            for node in trace["nodes"]
            for call in (node.get("message") or {}).get("tool_calls") or ()
        ]
        assert set(calls) == ({"act"} if tool_calls == "native" else set())
    # The env server (on --env-port), the policy, the eval; nothing launched with UV.
    assert gone(f"--port {env_port}")
    assert gone(f"--port {policy_port}")
    assert gone(str(tmp_path))
    assert wordle_uv_servers() == []
