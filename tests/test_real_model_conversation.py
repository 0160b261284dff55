"""The conversation only grows (verifiers 0.2): each model request repeats the
previous one's messages exactly, then adds the model's reply and what answered it.

Trainers that keep token ids per turn (prime-rl) need one growing sequence; a
request that rewrites or drops an earlier turn forks the trace's message graph. The
local policy records every request it gets; the checks are `tests/real_llm_checks.py`.
"""

from collections.abc import Iterator

import pytest

from tests.real_llm_checks import assert_conversation_grows, assert_one_branch
from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    recorded_requests,
    run_eval,
    uvicorn_server,
)

NATIVE_SCRIPT = [
    '{"tool_name": "add", "arguments": {"n": 2}}',
    "Let me look at the counter first.",  # no tool call: the simulator reminds it
    '{"tool_name": "peek"}',
    '{"tool_name": "add", "arguments": {"n": 4}}',
    '{"tool_name": "submit", "arguments": {"answer": 7}}',
]
"""The counter from `{"start": 1}` through tool calls, with a reply that calls none."""


@pytest.fixture(scope="module")
def atari_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:atari_app", app_dir=TEST_ENVS) as url:
        yield url


def test_text_requests_with_images_only_grow(atari_url, tmp_path):
    """Text mode, an image in every user turn: three requests, each the one before
    plus the reply and the next observation (its PNG included)."""
    record = tmp_path / "requests.jsonl"
    script = ['{"action_id": 1}']
    with policy_server("script", script=script, record=record) as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", atari_url, *model_flags(policy)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    bodies = recorded_requests(record)
    assert len(bodies) == 3
    assert all(
        any(p["type"] == "image_url" for p in m["content"])
        for m in bodies[-1]["messages"]
        if m["role"] == "user"
    )
    assert_conversation_grows(bodies, script)
    assert_one_branch(trace)


def test_native_requests_keep_the_opening_and_every_turn(counter_url, tmp_path):
    """Native tool calls: the harness sends a request per tool-calling turn. The
    simulator's opening (the task), which verifiers adds to the first request only,
    and a reply that called no tool with its reminder, which verifiers answers
    inside one request, stay in every later request as they were sent."""
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=NATIVE_SCRIPT, record=record) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                counter_url,
                "--taskset.resets",
                '[{"start": 1}]',
                "--taskset.tool-calls",
                "native",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    assert trace["rewards"]["openenv_reward"] == 0.25 + 0.0 + 0.25 + 1.0
    bodies = recorded_requests(record)
    assert len(bodies) == len(NATIVE_SCRIPT)
    assert "counter starts at 1" in bodies[-1]["messages"][0]["content"]
    assert_conversation_grows(bodies, NATIVE_SCRIPT)
    assert_one_branch(trace)
