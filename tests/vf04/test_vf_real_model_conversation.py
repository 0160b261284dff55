"""The conversation only grows (verifiers 0.4): each model request repeats the
previous one's messages exactly, then adds the model's reply and what answered it.

verifiers 0.4 launches the chat harness once per segment, on the conversation as the
trace holds it; a reply the harness sent in one form and verifiers replays in
another would rewrite an earlier turn. Same checks as on 0.2
(`tests/test_real_model_conversation.py`).
"""

from collections.abc import Iterator

import pytest

from tests.real_llm_checks import assert_conversation_grows, assert_one_branch
from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    recorded_requests,
    uvicorn_server,
)
from tests.test_real_model_conversation import NATIVE_SCRIPT
from tests.vf04.evals import run_vf_eval, traces_of


@pytest.fixture(scope="module")
def atari_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:atari_app", app_dir=TEST_ENVS) as url:
        yield url


def test_text_requests_with_images_only_grow(atari_url, tmp_path):
    record = tmp_path / "requests.jsonl"
    script = ['{"action_id": 1}']
    with policy_server("script", script=script, record=record) as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", atari_url, *model_flags(policy)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    bodies = recorded_requests(record)
    assert len(bodies) == 3
    assert_conversation_grows(bodies, script)
    assert_one_branch(trace)


def test_native_requests_replay_every_turn_as_sent(counter_url, tmp_path):
    """Native tool calls with a reply that calls no tool: the segment after it is
    launched on the conversation as verifiers replays it, and the tool-calling
    replies before it are replayed exactly as the harness first sent them."""
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=NATIVE_SCRIPT, record=record) as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-v1",
                "--env.taskset.base-url",
                counter_url,
                "--env.taskset.resets",
                '[{"start": 1}]',
                "--env.taskset.tool-calls",
                "native",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    assert trace["rewards"]["openenv_reward"]["score"] == 0.25 + 0.0 + 0.25 + 1.0
    bodies = recorded_requests(record)
    assert len(bodies) == len(NATIVE_SCRIPT)
    assert_conversation_grows(bodies, NATIVE_SCRIPT)
    assert_one_branch(trace)
