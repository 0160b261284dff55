"""An MCP env on openenv-core 0.2.2 (`tests/envs/layouts/old_mcp_env`, its uv.lock
pinning it, as OpenEnv's echo_env's does), whose MCP steps deadlock over `/ws`.

Launched from its folder, its tools are listed and called through the session's
JSON-RPC, on the session the episode reset: `reset(seed=5)` starts the tally at 5, so
`add(3)` answering 8 shows the call reached that env instance (a fresh one says 3).
Connected to by URL (no lock to read), the hung `list_tools` step is named within
`--timeout`, with the fix.
"""

import time

import pytest

from openenv_v1.core.episode.mcp_route import locked_core_version, needs_session_rpc
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.launch.uv import uv_launch_plan
from openenv_v1.core.launch.uv_prepared import prepared_env_dir
from tests.servers import recorded_requests
from tests.test_layouts import (
    LAYOUTS,
    check,
    check_json,
    eval_layout,
    messages_of,
    none_left,
)

PROJECT = LAYOUTS / "old_mcp_env"
ENV_DIR = prepared_env_dir(str(PROJECT), "layout-old-mcp-env")
TALLY_SCRIPT = [
    '{"tool_name": "add", "arguments": {"n": 3}}',
    '{"tool_name": "report"}',
    '{"tool_name": "add", "arguments": {"n": -1}}',
    '{"tool_name": "add", "arguments": {"n": -2}}',
    '{"tool_name": "add", "arguments": {"n": -3}}',
]
"""From `{"seed": 5}`: tally 8, a report, then three refused calls in a row."""


def test_only_an_env_locked_to_openenv_core_0_2_2_gets_the_json_rpc_route():
    assert locked_core_version(PROJECT) == "0.2.2"
    assert needs_session_rpc(PROJECT)
    assert locked_core_version(LAYOUTS / "mcp_meta_env") is None  # openenv 0.10
    assert not needs_session_rpc(LAYOUTS / "mcp_meta_env")
    assert not needs_session_rpc(None)  # a server by URL: no lock to read


@pytest.fixture
def old_mcp_url():
    """The env's server, launched from its folder as a rollout launches it."""
    plan = uv_launch_plan(
        EnvTarget(
            env="local/old_mcp_env", provider_kwargs={"project_path": str(PROJECT)}
        )
    )
    provider = plan.launcher
    try:
        provider.start(**plan.start_args)
        yield provider.wait_for_ready()
    finally:
        # The deadlocked session keeps uvicorn from a graceful exit: little grace.
        provider.stop(grace_s=2.0)


def test_check_calls_the_tools_of_an_openenv_core_0_2_2_env_on_the_reset_session(
    tmp_path,
):
    lock = (PROJECT / "uv.lock").read_bytes()
    proc, report = check_json(
        "old_mcp_env",
        "--reset",
        '{"seed": 5}',
        "--action",
        '{"tool_name": "add", "arguments": {"n": 3}}',
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"], report["failure"]
    assert report["action"]["mcp"] and report["action"]["mcp_route"] == "session_rpc"
    assert [t["name"] for t in report["tools"]] == ["add", "report"]
    assert report["tools"][0]["arguments"][0]["name"] == "n"
    assert report["reset"]["observation"]["message"].startswith("The tally starts at 5")
    step = report["step"]
    assert step["observation"]["result"]["data"] == {"tally": 8, "calls": 1}
    assert (step["reward"], step["done"]) == (None, False)
    assert step["turn"] == 'add: {"tally":8,"calls":1}'
    assert report["seed_check"]["status"] == "match"
    assert (PROJECT / "uv.lock").read_bytes() == lock
    assert none_left(ENV_DIR)


def test_check_names_a_hung_mcp_step_within_its_timeout(old_mcp_url, tmp_path):
    started = time.monotonic()
    proc = check("--base-url", old_mcp_url, "--timeout", "5", cwd=tmp_path)
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert "FAILED at schema" in proc.stdout
    assert "list_tools step did not answer within 5s" in proc.stdout
    assert "openenv-core 0.2.2 deadlock on MCP steps" in proc.stdout
    assert "pin openenv-core>=0.2.3" in proc.stdout
    assert "launch it from its folder (--project-path)" in proc.stdout  # the hint
    # The step's 5s, plus connecting and closing (a loaded machine is slow).
    assert took < 60, took


def test_eval_of_an_openenv_core_0_2_2_mcp_env_steps_each_tool_call(tmp_path):
    record = tmp_path / "requests.jsonl"
    proc, traces = eval_layout(
        "old_mcp_env", TALLY_SCRIPT, '[{"seed": 5}]', tmp_path, record
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == [], trace["errors"]
    # Every call was a step; the three refused ones in a row end the episode.
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_steps"] == 5
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["rewards"]["openenv_reward"] == 0.0
    users = [
        text
        for role, text in messages_of(recorded_requests(record)[-1])
        if role == "user"
    ]
    opening, added, reported, refused = users[:4]
    assert opening.startswith("The tally starts at 5. Grow it with add.")
    assert '"tool_name":<name>' in opening and "- add:" in opening
    assert added == 'add: {"tally":8,"calls":1}'
    assert reported == "report: the tally is 8 after 2 calls"
    assert refused.startswith("error: ") and "cannot add -1" in refused
    assert none_left(ENV_DIR)
