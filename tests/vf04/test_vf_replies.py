"""Real evals (verifiers 0.4) with a policy that replies like a reasoning model, and
like a tool-calling model served without a tool parser."""

from tests.servers import model_flags, policy_server, recorded_requests
from tests.test_replies_eval import _replies, _user_texts
from tests.vf04.evals import run_vf_eval, traces_of


def _wordle(url: str, *extra: str) -> list[str]:
    return [
        "openenv-v1",
        "--env.taskset.base-url",
        url,
        "--env.taskset.resets",
        '[{"seed": 1}]',
        *extra,
    ]


def test_reasoning_replies_play_the_final_answer_and_cut_replies_get_feedback(
    wordle_url, tmp_path
):
    record = tmp_path / "requests.jsonl"
    with policy_server("reasoning", record=record) as policy:
        proc, episodes = run_vf_eval(
            [*_wordle(wordle_url), *model_flags(policy)], tmp_path
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == []
    assert trace["info"]["openenv"]["stop_reason"] == "done"
    assert trace["rewards"]["openenv_reward"]["score"] == 1.0
    said = _user_texts(recorded_requests(record))
    # `[fuzzy]` is in each reply's reasoning and in its `reasoning_content`.
    assert not any("You submitted [fuzzy]" in text for text in said)
    # Both cut-off replies are feedback: the first ended inside its reasoning, the
    # second (a valid guess after closed reasoning) had `finish_reason: "length"`.
    assert trace["metrics"]["openenv_invalid_action_count"] == 2
    assert "Invalid action: your reply ended inside its reasoning" in said[1]
    assert "Invalid action: your reply was cut off at the length limit" in said[2]
    assert "You submitted [" in said[3]
    replies = _replies(recorded_requests(record))
    assert replies and all(r.startswith("<think>") for r in replies)


def test_native_tool_call_written_as_text_is_stepped_as_that_call(wordle_url, tmp_path):
    record = tmp_path / "requests.jsonl"
    with policy_server("tool-call-text", record=record) as policy:
        proc, episodes = run_vf_eval(
            [
                *_wordle(wordle_url, "--env.taskset.tool-calls", "native"),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == []
    assert trace["info"]["openenv"]["stop_reason"] == "done"
    assert trace["rewards"]["openenv_reward"]["score"] == 1.0
    assert trace["metrics"]["openenv_invalid_action_count"] == 0
    said = _user_texts(recorded_requests(record))
    assert not any("You submitted [fuzzy]" in text for text in said)
