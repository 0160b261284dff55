"""Native tool calling (`--taskset.tool-calls native`): the env's tools as the model's.

The tool server is run as verifiers runs it (its own process, a state channel), and
called as the null harness calls it; then real `eval` runs play through it.
"""

import asyncio
import json
import time

from openenv_v1.null_harness import null_harness_flags
from openenv_v1.user import OpenEnvData
from tests.servers import (
    free_port,
    model_flags,
    policy_server,
    recorded_requests,
    run_eval,
    wordle_uv_flags,
    wordle_uv_servers,
)
from tests.tool_server import call_tool, list_tools, opening_text, tool_server


def native_task(url: str, reset: dict) -> OpenEnvData:
    return OpenEnvData(
        idx=0,
        prompt=None,
        env=None,
        base_url=url,
        use_docker=False,
        reset=reset,
        tool_calls="native",
    )


def test_an_mcp_envs_tools_are_listed_as_its_own(counter_url, tmp_path):
    with tool_server(native_task(counter_url, {"start": 1}), tmp_path) as (url, chan):
        tools = asyncio.run(list_tools(url))
        assert [t.name for t in tools] == ["add", "peek", "submit"]
        add = tools[0]
        assert add.description == "Add n to the counter and return the new value."
        assert add.inputSchema["properties"] == {"n": {"type": "integer"}}
        assert add.inputSchema["required"] == ["n"]
        # The reset observation waits on the state for the user simulator.
        assert opening_text(chan).startswith("counter starts at 1")
        assert chan.state.tool_names == ["add", "peek", "submit"]


def test_another_env_gets_one_act_tool_taking_its_action(wordle_url, tmp_path):
    with tool_server(native_task(wordle_url, {"seed": 1}), tmp_path) as (url, chan):
        (act,) = asyncio.run(list_tools(url))
        assert act.name == "act"
        assert act.inputSchema["required"] == ["message"]
        assert "metadata" not in act.inputSchema["properties"]
        assert "Wordle" in opening_text(chan)
        assert "Act by calling the `act` tool" in opening_text(chan)
        text, failed = asyncio.run(call_tool(url, "act", {"message": "[crane]"}))
        assert "You submitted [crane]" in text and not failed
        assert chan.state.steps == 1


def test_a_call_delivered_twice_steps_the_env_once(counter_url, tmp_path):
    """The null harness retries a call whose answer was lost, on a fresh session, with
    the same arguments, before the model is called again."""
    with tool_server(native_task(counter_url, {"start": 1}), tmp_path) as (url, chan):
        first = asyncio.run(call_tool(url, "add", {"n": 2}))
        again = asyncio.run(call_tool(url, "add", {"n": 2}))
        assert first == again == ("add: 3", False)
        assert (chan.state.steps, chan.state.reward) == (1, 0.25)
        # The next model turn (stamped by the task's stops) makes it a new call.
        chan.state.turn += 1
        assert asyncio.run(call_tool(url, "add", {"n": 2})) == ("add: 5", False)
        assert asyncio.run(call_tool(url, "peek", {})) == ("peek: 5", False)
        assert (chan.state.steps, chan.state.reward) == (3, 0.5)


def test_mistakes_are_tool_errors_counted_until_the_episode_ends(counter_url, tmp_path):
    with tool_server(native_task(counter_url, {}), tmp_path) as (url, chan):
        text, failed = asyncio.run(call_tool(url, "add", {"n": "two"}))
        assert failed and "Invalid call" in text and "must be of type integer" in text
        assert "2 more invalid actions in a row will end the episode" in text
        # A tool error of the env's own is a step, and counts too.
        chan.state.turn += 1
        text, failed = asyncio.run(call_tool(url, "add", {"n": 500}))
        assert failed and "n=500 is over 100" in text
        assert (chan.state.steps, chan.state.invalid_streak) == (1, 2)
        chan.state.turn += 1
        text, failed = asyncio.run(call_tool(url, "submit", {}))
        assert failed and "the episode is over" in text
        assert chan.state.stop_reason == "invalid_actions"
        # Nothing is stepped after the end.
        chan.state.turn += 1
        assert asyncio.run(call_tool(url, "peek", {})) == ("The episode is over.", True)
        assert (chan.state.steps, chan.state.invalid_actions) == (1, 3)


COUNTER_SCRIPT = [
    '{"tool_name": "add", "arguments": {"n": 2}}',
    '{"tool_name": "peek"}',
    '{"tool_name": "add", "arguments": {"n": 4}}',
    '{"tool_name": "submit", "arguments": {"answer": 7}}',
]


def test_native_calls_score_exactly_as_text_replies(counter_url, tmp_path):
    """The same scripted strategy and reset, once written as text and once as native
    tool calls: the same steps, rewards and end."""
    outcomes = {}
    for mode in ("text", "native"):
        record = tmp_path / f"{mode}.jsonl"
        workdir = tmp_path / mode
        workdir.mkdir()
        with policy_server("script", script=COUNTER_SCRIPT, record=record) as policy:
            proc, traces = run_eval(
                [
                    "openenv-v1",
                    "--taskset.base-url",
                    counter_url,
                    "--taskset.resets",
                    '[{"start": 1}]',
                    "--taskset.tool-calls",
                    mode,
                    *null_harness_flags(),
                    *model_flags(policy),
                ],
                workdir,
            )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (trace,) = traces
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        outcomes[mode] = (
            trace["rewards"]["openenv_reward"],
            trace["metrics"]["openenv_steps"],
            trace["info"]["openenv"],
        )
        requests = recorded_requests(record)
        tools = [t["function"]["name"] for t in requests[0].get("tools") or []]
        assert tools == (["add", "peek", "submit"] if mode == "native" else [])
    assert outcomes["native"] == outcomes["text"]
    assert outcomes["native"][:2] == (0.25 + 0.0 + 0.25 + 1.0, 4)


def test_wordle_plays_through_its_act_tool_on_a_shared_server(tmp_path):
    assert wordle_uv_servers() == []
    record = tmp_path / "requests.jsonl"
    with policy_server("solver", record=record) as policy:
        proc, traces = run_eval(
            [
                *wordle_uv_flags('[{"seed": 4}, {"seed": 5}]'),
                "--taskset.tool-calls",
                "native",
                "-c",
                "2",
                *null_harness_flags(),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"] == 1.0
    calls = [
        call["function"]
        for body in recorded_requests(record)
        for message in body["messages"]
        for call in message.get("tool_calls") or ()
    ]
    assert calls and {c["name"] for c in calls} == {"act"}
    assert all(json.loads(c["arguments"]).keys() == {"message"} for c in calls)
    assert wordle_uv_servers() == []


def test_replies_without_a_tool_call_get_a_reminder_and_end_cleanly(
    counter_url, tmp_path
):
    record = tmp_path / "requests.jsonl"
    with policy_server("free-text", record=record) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                counter_url,
                "--taskset.tool-calls",
                "native",
                *null_harness_flags(),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == []
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["metrics"]["openenv_steps"] == 0
    last = recorded_requests(record)[-1]["messages"][-1]["content"]
    assert "a reply without a tool call does not step the environment" in last


def test_an_env_failure_ends_the_rollout_fast_with_the_cause(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                closed,
                "--taskset.tool-calls",
                "native",
                *null_harness_flags(),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    assert closed in error["message"] and "ECONNREFUSED" in error["message"]
    assert time.monotonic() - started < 60


def test_native_calls_run_through_the_env_server_workers(counter_url, tmp_path):
    """`eval --server`: rollouts run in verifiers' env-server workers (the path
    prime-rl trains through), each still with its own tool server."""
    with policy_server("script", script=COUNTER_SCRIPT) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                counter_url,
                "--taskset.resets",
                '[{"start": 1}, {"start": 1}]',
                "--taskset.tool-calls",
                "native",
                "--server",
                "--no-rich",
                *null_harness_flags(),
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"] == 0.25 + 0.0 + 0.25 + 1.0


def test_the_tool_server_takes_the_user_simulators_placement_and_settings():
    """Docker runs the env session's owner on a Prime VM: in native mode that is the
    tool server, configured as the user simulator would be."""
    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
    from openenv_v1.tools import OpenEnvTools

    config = OpenEnvConfig(
        env="org/env",
        use_docker=True,
        tool_calls="native",
        task={"user": {"step_timeout_s": 7, "provider_kwargs": {"tag": "v1"}}},
    )
    (task,) = OpenEnvTaskset(config).load()
    (server,) = task.tool_servers()
    assert isinstance(server, OpenEnvTools) and server.server_name == ""
    runtime = server.config.runtime
    assert (runtime.type, runtime.vm, server.config.colocated) == ("prime", True, False)
    assert server.config.step_timeout_s == 7
    assert server.config.provider_kwargs == {"tag": "v1"}
    text = OpenEnvConfig(env="org/env", use_docker=True)
    (task,) = OpenEnvTaskset(text).load()
    assert task.tool_servers() == []
