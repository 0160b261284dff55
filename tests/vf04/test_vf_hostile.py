"""verifiers 0.4: a hostile env server ends only its own episode, with the fault named,
as on 0.2 (`tests/test_hostile.py`, whose server, expectations and core-level schema
tests run here too, on this line's jsonschema and OpenEnv client)."""

import json
import secrets

import pytest

from tests.servers import WORDLE_PROJECT, model_flags, policy_server
from tests.test_hostile import (  # noqa: F401  (tests and fixture run here too)
    ALL_FAULTS,
    SECRET_NAME,
    check_hostile_eval,
    hostile_url,
    test_a_recursive_schema_renders_and_plays,
    test_schema_faults_are_setup_errors_naming_the_fault_and_fetch_nothing,
    test_schema_reads_have_one_deadline_and_a_body_cap,
)
from tests.vf04.evals import run_vf_eval


def test_each_hostile_frame_ends_only_its_own_episode_naming_the_fault(
    hostile_url,  # noqa: F811
    tmp_path,
):
    record = tmp_path / "requests.jsonl"
    resets = json.dumps([{"fault": fault} for fault in ALL_FAULTS])
    with policy_server("script", script=["go"], record=record) as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", hostile_url]
            + ["--env.taskset.resets", resets, "-c", "4", *model_flags(policy)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    accounts = {}
    for episode in episodes:
        fault = episode["task"]["data"]["reset"]["fault"]
        if not episode["traces"]:
            # Failed before its first turn (the reset): the episode holds the error.
            errors = [e["message"] for e in episode["errors"]]
            accounts[fault] = ({"reward": None, "steps": 0}, errors, None)
            continue
        (trace,) = episode["traces"]
        reward = trace["rewards"].get("openenv_reward")
        accounts[fault] = (
            trace["info"]["openenv"],
            [e["message"] for e in trace["errors"]],
            None if reward is None else reward["score"],
        )
    check_hostile_eval(accounts, record)


@pytest.mark.parametrize("shared", [True, False], ids=["pool", "per-rollout"])
def test_forwarded_values_a_failing_server_echoes_are_redacted_everywhere(
    tmp_path, shared
):
    value = f"sk-test-{secrets.token_hex(8)}"
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT)})
    with policy_server("script", script=["crane"]) as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.env", "local/wordle"]
            + ["--env.taskset.provider-kwargs", kwargs]
            + ["--env.taskset.shared-servers", str(shared).lower()]
            + ["--env.taskset.forward-env", json.dumps([SECRET_NAME])]
            + model_flags(policy),
            tmp_path,
            environ={SECRET_NAME: value},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    failed = f"{json.dumps(episode)[:3000]}\n{proc.stderr[-3000:]}"
    assert len(episode["errors"]) == 1, failed
    (error,) = episode["errors"]
    assert 'Import string "<redacted>" must be in format' in error["message"]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    for path in written:
        assert value not in path.read_text(errors="replace"), path
