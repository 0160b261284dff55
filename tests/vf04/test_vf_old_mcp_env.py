"""verifiers 0.4: the openenv-core 0.2.2 MCP env (`old_mcp_env`, see
tests/test_old_mcp_env.py), launched from its folder on its own uv.lock, through a real
`vf-eval`: its tools are called on the session the episode reset, each call a step."""

import json

from tests.servers import model_flags, policy_server, recorded_requests
from tests.test_layouts import messages_of, none_left
from tests.test_old_mcp_env import ENV_DIR, PROJECT, TALLY_SCRIPT
from tests.vf04.evals import run_vf_eval, traces_of


def test_vf_eval_of_an_openenv_core_0_2_2_mcp_env_steps_each_tool_call(tmp_path):
    record = tmp_path / "requests.jsonl"
    kwargs = json.dumps({"project_path": str(PROJECT)})
    with policy_server("script", script=TALLY_SCRIPT, record=record) as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-v1",
                "--env.taskset.env",
                "local/old_mcp_env",
                "--env.taskset.provider-kwargs",
                kwargs,
                "--env.taskset.resets",
                '[{"seed": 5}]',
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_steps"] == 5
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["rewards"]["openenv_reward"]["score"] == 0.0
    users = [
        text
        for role, text in messages_of(recorded_requests(record)[-1])
        if role == "user"
    ]
    opening, added, reported, refused = users[:4]
    assert opening.startswith("The tally starts at 5. Grow it with add.")
    assert added == 'add: {"tally":8,"calls":1}'
    assert reported == "report: the tally is 8 after 2 calls"
    assert refused.startswith("error: ") and "cannot add -1" in refused
    assert none_left(ENV_DIR)
