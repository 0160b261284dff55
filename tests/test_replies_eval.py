"""Real evals (verifiers 0.2) with a policy that replies like a reasoning model, and
like a tool-calling model served without a tool parser."""

import json

from tests.servers import model_flags, policy_server, recorded_requests, run_eval


def _user_texts(bodies: list[dict]) -> list[str]:
    """What the env said to the model, in order (the last request has it all)."""
    messages = bodies[-1]["messages"]
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in messages
        if m["role"] in ("user", "tool")
    ]


def _replies(bodies: list[dict]) -> list[str]:
    return [
        m.get("content") or ""
        for m in bodies[-1]["messages"]
        if m["role"] == "assistant"
    ]


def _solved_eval(mode: str, wordle_url: str, tmp_path, *flags: str):
    """One eval of Wordle seed 1 against the local policy in `mode`, with `flags`;
    asserts it solved the game without an error and returns its trace and the
    policy's recorded requests file."""
    record = tmp_path / "requests.jsonl"
    with policy_server(mode, record=record) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                wordle_url,
                "--taskset.resets",
                '[{"seed": 1}]',
                *flags,
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == []
    assert trace["stop_condition"] == "openenv_done"
    assert trace["rewards"]["openenv_reward"] == 1.0
    return trace, record


def test_reasoning_replies_play_the_final_answer_and_cut_reasoning_gets_feedback(
    wordle_url, tmp_path
):
    trace, record = _solved_eval("reasoning", wordle_url, tmp_path)
    # Solved: every guess played was a final answer, never the `[fuzzy]` of the
    # reasoning (which the env's own parser would not take for the solver's word).
    said = _user_texts(recorded_requests(record))
    # `[fuzzy]` is in each reply's reasoning and in its `reasoning_content`.
    assert not any("You submitted [fuzzy]" in text for text in said)
    # The first reply was cut inside its reasoning: feedback, not a step. (The second
    # was cut after it; verifiers 0.2 does not pass `finish_reason` to the
    # simulator, so that one is played.)
    assert trace["metrics"]["openenv_invalid_action_count"] == 1
    assert "Invalid action: your reply ended inside its reasoning" in said[1]
    assert "You submitted [" in said[2]
    # The conversation keeps each reply whole, reasoning included.
    replies = _replies(recorded_requests(record))
    assert replies and all(r.startswith("<think>") for r in replies)
    assert json.dumps(trace).count("<think>") >= len(replies)


def test_native_tool_call_written_as_text_is_stepped_as_that_call(wordle_url, tmp_path):
    trace, record = _solved_eval(
        "tool-call-text", wordle_url, tmp_path, "--taskset.tool-calls", "native"
    )
    assert trace["metrics"]["openenv_invalid_action_count"] == 0
    bodies = recorded_requests(record)
    assert all(not m.get("tool_calls") for m in bodies[-1]["messages"])
    assert not any("You submitted [fuzzy]" in text for text in _user_texts(bodies))
