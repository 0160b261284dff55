"""verifiers 0.4, native tool calling (`--env.taskset.tool-calls native`): real
`vf-eval` runs where the env's tools are the model's own and the chat harness steps
each call in process; the same outcomes as the 0.2 binding's native runs
(test_native.py)."""

import time

from tests.servers import (
    COUNTER_SCRIPT,
    TEST_ENVS,
    assert_only_act_calls,
    assert_out_of_invalid_actions,
    assert_steps_between_model_calls,
    free_port,
    model_flags,
    policy_server,
    recorded_requests,
    tool_calls_made,
    uvicorn_server,
    wordle_uv_servers,
)
from tests.test_image_evals import parts
from tests.vf04.evals import run_vf_eval, traces_of, wordle_uv_flags

NATIVE = ("--env.taskset.tool-calls", "native")


def native_eval(policy: str, cwd, *flags: str) -> list[dict]:
    """A native `vf-eval`; its traces (the eval must exit 0)."""
    proc, episodes = run_vf_eval([*flags, *NATIVE, *model_flags(policy)], cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return traces_of(episodes)


def test_native_calls_score_exactly_as_text_replies(counter_url, tmp_path):
    """The same scripted strategy and reset, once written as text and once as native
    tool calls: the same steps, reward, account and end."""
    outcomes, traces = {}, {}
    for mode in ("text", "native"):
        record = tmp_path / f"{mode}.jsonl"
        workdir = tmp_path / mode
        workdir.mkdir()
        with policy_server("script", script=COUNTER_SCRIPT, record=record) as policy:
            proc, episodes = run_vf_eval(
                [
                    "openenv-v1",
                    *("--env.taskset.base-url", counter_url),
                    *("--env.taskset.resets", '[{"start": 1}]'),
                    *("--env.taskset.tool-calls", mode),
                    *model_flags(policy),
                ],
                workdir,
            )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (trace,) = traces_of(episodes)
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        traces[mode] = trace
        outcomes[mode] = (
            trace["rewards"]["openenv_reward"]["score"],
            trace["metrics"]["openenv_steps"],
            trace["info"]["openenv"],
        )
        requests = recorded_requests(record)
        tools = [t["function"]["name"] for t in requests[0].get("tools") or []]
        assert tools == (["add", "peek", "submit"] if mode == "native" else [])
    assert outcomes["native"] == outcomes["text"]
    assert outcomes["native"][:2] == (0.25 + 0.0 + 0.25 + 1.0, 4)
    # One model call per step, each answered by a tool result of that step.
    requests = recorded_requests(tmp_path / "native.jsonl")
    assert len(requests) == 4
    calls = tool_calls_made(requests[-1:])
    assert [c["name"] for c in calls] == ["add", "peek", "add"]
    results = [m["content"] for m in requests[-1]["messages"] if m["role"] == "tool"]
    assert results == ["add: 3", "peek: 3", "add: 7"]
    # The trace holds the tool calls and their results, as the interception saw them.
    messages = [node["message"] for node in traces["native"]["nodes"]]
    called = [c["name"] for m in messages for c in m.get("tool_calls") or ()]
    assert called == ["add", "peek", "add", "submit"]
    results = [m["content"] for m in messages if m["role"] == "tool"]
    assert results[:3] == ["add: 3", "peek: 3", "add: 7"]


def test_wordle_plays_through_its_act_tool_on_a_shared_uv_server(tmp_path):
    assert wordle_uv_servers() == []
    record = tmp_path / "requests.jsonl"
    with policy_server("solver", record=record) as policy:
        resets = '[{"seed": 4}, {"seed": 5}]'
        traces = native_eval(policy, tmp_path, *wordle_uv_flags(resets), "-c", "2")
    assert len(traces) == 2
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"]["score"] == 1.0
        assert_steps_between_model_calls(trace)
    bodies = recorded_requests(record)
    assert all([t["function"]["name"] for t in b["tools"]] == ["act"] for b in bodies)
    assert_only_act_calls(bodies)
    assert wordle_uv_servers() == []


def test_replies_without_a_tool_call_get_a_reminder_and_end_cleanly(
    counter_url, tmp_path
):
    record = tmp_path / "requests.jsonl"
    with policy_server("free-text", record=record) as policy:
        flags = ("openenv-v1", "--env.taskset.base-url", counter_url)
        (trace,) = native_eval(policy, tmp_path, *flags)
    assert_out_of_invalid_actions(trace, steps=0)
    requests = recorded_requests(record)
    assert len(requests) == 3  # the third reminder would end it: not sent
    last = requests[-1]["messages"][-1]["content"]
    assert "a reply without a tool call does not step the environment" in last
    assert "1 more invalid action in a row will end the episode" in last


def test_mistaken_calls_are_answered_counted_and_end_the_episode(counter_url, tmp_path):
    """A call against the tool's schema, a call of no such tool (both answered
    without a step), and a tool error of the env's own (a step): three invalid
    actions in a row."""
    script = [
        '{"tool_name": "add", "arguments": {"n": "two"}}',
        '{"tool_name": "jump", "arguments": {}}',
        '{"tool_name": "add", "arguments": {"n": 500}}',
    ]
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=script, record=record) as policy:
        flags = ("openenv-v1", "--env.taskset.base-url", counter_url)
        (trace,) = native_eval(policy, tmp_path, *flags)
    assert_out_of_invalid_actions(trace, steps=1)
    results = [
        m["content"]
        for m in recorded_requests(record)[-1]["messages"]
        if m["role"] == "tool"
    ]
    assert len(results) == 2
    assert "Invalid call" in results[0] and "must be of type integer" in results[0]
    assert "2 more invalid actions in a row" in results[0]
    assert "jump" in results[1] and "1 more invalid action in a row" in results[1]


def test_a_pinned_harness_that_cannot_step_tools_is_refused_at_once(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"  # never reached
    started = time.monotonic()
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            [
                *("openenv-v1", "--env.taskset.base-url", closed, *NATIVE),
                *("--env.player.harness.id", "null"),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode != 0 and episodes == []
    assert "tool_calls native runs the tool calls in this package's chat" in proc.stderr
    assert "drop --env.player.harness.id" in proc.stderr
    assert time.monotonic() - started < 60


def test_frames_come_back_as_png_parts_of_the_tool_result(tmp_path):
    record = tmp_path / "requests.jsonl"
    script = ['{"action_id": 1}']
    with (
        uvicorn_server("pixel_envs:atari_app", app_dir=TEST_ENVS) as url,
        policy_server("script", script=script, record=record) as policy,
    ):
        (trace,) = native_eval(
            policy, tmp_path, "openenv-v1", "--env.taskset.base-url", url
        )
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    assert trace["metrics"]["openenv_steps"] == 3
    messages = recorded_requests(record)[-1]["messages"]
    turns = [m for m in messages if m["role"] in ("user", "tool")]
    assert [m["role"] for m in turns] == ["user", "tool", "tool"]
    for step, message in enumerate(turns):
        text, images = parts(message)
        assert "screen: image 210x160x3, attached" in text
        (frame,) = images
        assert (frame.format, frame.size) == ("PNG", (160, 210))
        assert frame.getpixel((5, 7)) == (40 * step % 256, 7, 5)


def test_a_turn_limit_mid_loop_keeps_the_steps_account_on_the_trace(
    counter_url, tmp_path
):
    """`max_turns` refuses the model call after the second tool call's step, inside
    the harness's loop: the run ends on the limit, and `info.openenv` has both
    steps."""
    with policy_server("script", script=COUNTER_SCRIPT) as policy:
        (trace,) = native_eval(
            policy,
            tmp_path,
            *("openenv-v1", "--env.taskset.base-url", counter_url),
            *("--env.taskset.resets", '[{"start": 1}]'),
            *("--env.player.max-turns", "2"),
        )
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "max_turns"
    assert trace["metrics"]["openenv_steps"] == 2
    assert trace["info"]["openenv"]["steps"] == 2
    assert trace["info"]["openenv"]["reward"] == 0.25
    assert trace["rewards"]["openenv_reward"]["score"] == 0.25
