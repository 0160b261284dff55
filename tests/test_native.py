"""Native tool calling (`--taskset.tool-calls native`): the env's tools as the model's.

The user simulator and the eval's tool server are run as verifiers runs them (their
own processes, a state channel), and called as the null harness calls them; then real
`eval` runs play through them, with the package's own harness (the default, no
harness flag) or verifiers' `null` harness (`--harness.id null`, nothing else).
"""

import asyncio
import contextlib
import os
import stat
import time

import pytest

from openenv_v1.core.local_http import parse_address
from openenv_v1.vf02.tool_desk import check_desk_address
from openenv_v1.vf02.user import OpenEnvData
from tests.servers import (
    COUNTER_SCRIPT,
    NULL_HARNESS,
    assert_only_act_calls,
    assert_out_of_invalid_actions,
    assert_steps_between_model_calls,
    free_port,
    model_flags,
    policy_server,
    recorded_requests,
    run_eval,
    wordle_uv_flags,
    wordle_uv_servers,
)
from tests.tool_server import (
    call_tool,
    list_tools,
    native_servers,
    opening_text,
    tool_server,
)


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
    task = native_task(counter_url, {"start": 1})
    with native_servers(task, tmp_path) as (tools_url, user_url, chan):
        tools = asyncio.run(list_tools(tools_url))
        assert [t.name for t in tools] == ["add", "peek", "submit"]
        add = tools[0]
        assert add.description == "Add n to the counter and return the new value."
        assert add.inputSchema["properties"] == {"n": {"type": "integer"}}
        assert add.inputSchema["required"] == ["n"]
        # The simulator left them, and its own address, on the state before serving.
        assert [t["name"] for t in chan.state.tools] == ["add", "peek", "submit"]
        # Its desk: a socket in a folder only this user can open, with a token.
        desk, token = parse_address(check_desk_address(chan.state.tool_desk))
        assert stat.S_IMODE(os.stat(os.path.dirname(desk)).st_mode) == 0o700
        assert len(token) >= 32
        assert opening_text(user_url).startswith("counter starts at 1")


def test_another_env_gets_one_act_tool_taking_its_action(wordle_url, tmp_path):
    task = native_task(wordle_url, {"seed": 1})
    with native_servers(task, tmp_path) as (tools_url, user_url, chan):
        (act,) = asyncio.run(list_tools(tools_url))
        assert act.name == "act"
        assert act.inputSchema["required"] == ["message"]
        assert "metadata" not in act.inputSchema["properties"]
        opening = opening_text(user_url)
        assert "Wordle" in opening
        assert "Act by calling the `act` tool" in opening
        text, failed = asyncio.run(call_tool(tools_url, "act", {"message": "[crane]"}))
        assert "You submitted [crane]" in text and not failed
        assert chan.state.account.steps == 1


def test_a_call_delivered_twice_steps_the_env_once(counter_url, tmp_path):
    """The null harness retries a call whose answer was lost, on a fresh session, with
    the same arguments, before the model is called again."""
    task = native_task(counter_url, {"start": 1})
    with native_servers(task, tmp_path) as (url, _, chan):
        first = asyncio.run(call_tool(url, "add", {"n": 2}))
        again = asyncio.run(call_tool(url, "add", {"n": 2}))
        assert first == again == ("add: 3", False)
        assert (chan.state.account.steps, chan.state.account.reward) == (1, 0.25)

        async def twice_at_once():
            return await asyncio.gather(
                call_tool(url, "add", {"n": 3}), call_tool(url, "add", {"n": 3})
            )

        # A retry racing the first attempt waits for it.
        chan.state.turn += 1
        assert asyncio.run(twice_at_once()) == [("add: 6", False)] * 2
        assert chan.state.account.steps == 2
        # The next model turn (stamped by the task's stops) makes it a new call.
        chan.state.turn += 1
        assert asyncio.run(call_tool(url, "add", {"n": 3})) == ("add: 9", False)
        assert asyncio.run(call_tool(url, "peek", {})) == ("peek: 9", False)
        assert (chan.state.account.steps, chan.state.account.reward) == (4, 0.75)


def test_one_tool_server_routes_each_rollout_to_its_own_session(counter_url, tmp_path):
    """The eval's one tool server serves every rollout, each through its own state
    channel, to its own simulator and env session."""
    with contextlib.ExitStack() as stack:
        tools_url = stack.enter_context(tool_server(tmp_path))
        rollouts = []
        for start in (10, 20):
            folder = tmp_path / str(start)
            folder.mkdir()
            task = native_task(counter_url, {"start": start})
            url, _, chan = stack.enter_context(
                native_servers(task, folder, tools_url=tools_url)
            )
            rollouts.append((url, chan))

        async def both():
            return await asyncio.gather(
                *(call_tool(url, "add", {"n": 1}) for url, _ in rollouts)
            )

        assert asyncio.run(both()) == [("add: 11", False), ("add: 21", False)]
        assert [chan.state.account.steps for _, chan in rollouts] == [1, 1]


def test_mistakes_are_tool_errors_counted_until_the_episode_ends(counter_url, tmp_path):
    with native_servers(native_task(counter_url, {}), tmp_path) as (url, _, chan):
        text, failed = asyncio.run(call_tool(url, "add", {"n": "two"}))
        assert failed and "Invalid call" in text and "must be of type integer" in text
        assert "2 more invalid actions in a row will end the episode" in text
        # A tool error of the env's own is a step, and counts too.
        chan.state.turn += 1
        text, failed = asyncio.run(call_tool(url, "add", {"n": 500}))
        assert failed and "n=500 is over 100" in text
        assert (chan.state.account.steps, chan.state.account.invalid_streak) == (1, 2)
        chan.state.turn += 1
        text, failed = asyncio.run(call_tool(url, "submit", {}))
        assert failed and "the episode is over" in text
        assert chan.state.account.stop_reason == "invalid_actions"
        # Nothing is stepped after the end.
        chan.state.turn += 1
        assert asyncio.run(call_tool(url, "peek", {})) == ("The episode is over.", True)
        assert (chan.state.account.steps, chan.state.account.invalid_actions) == (1, 3)


def native_eval(policy: str, cwd, *flags: str) -> list[dict]:
    """A native `eval` of the counter or Wordle env with the default harness; its
    traces (the eval must exit 0)."""
    proc, traces = run_eval(
        [*flags, "--taskset.tool-calls", "native", *model_flags(policy)], cwd
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return traces


HARNESSES = {"default": [], "null": NULL_HARNESS}
"""The package's in-process harness (no flag), and verifiers' `null` harness."""


@pytest.mark.parametrize(
    ("mode", "harness"),
    [("text", "default"), ("native", "default"), ("native", "null")],
)
def test_native_calls_score_exactly_as_text_replies(
    counter_url, tmp_path, mode, harness
):
    """The same scripted strategy and reset, written as text and made as native tool
    calls, by either harness with no other flag: the same steps, rewards and end."""
    record = tmp_path / "requests.jsonl"
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
                *HARNESSES[harness],
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "openenv_done"
    assert trace["agent"]["harness"]["id"] == (
        "openenv-v1" if harness == "default" else "null"
    )
    assert trace["rewards"]["openenv_reward"] == 0.25 + 0.0 + 0.25 + 1.0
    assert trace["metrics"]["openenv_steps"] == 4
    assert trace["info"]["openenv"] == {
        "reward": 1.5,
        "reward_mode": "sum",
        "step_rewards": [0.25, 0.0, 0.25, 1.0],
        "steps": 4,
        "invalid_actions": 0,
        "stop_reason": "done",
    }
    requests = recorded_requests(record)
    tools = [t["function"]["name"] for t in requests[0].get("tools") or []]
    assert tools == (["add", "peek", "submit"] if mode == "native" else [])


def test_the_tasksets_bring_a_harness_that_runs_in_the_eval_process():
    """`openenv-v1` ids resolve to the package's harness by default; a harness
    runtime (a container, a sandbox) is refused when the config is read, naming the
    flags."""
    import verifiers.v1 as vf
    from verifiers.v1.loaders import default_harness_id, harness_class

    from openenv_v1.vf02.harness import OpenEnvHarness, OpenEnvHarnessConfig

    for taskset in ("openenv-v1", "openenv-wordle-v1"):
        assert harness_class(default_harness_id(taskset)) is OpenEnvHarness
    for runtime in (vf.DockerConfig(), vf.PrimeConfig()):
        with pytest.raises(ValueError, match="drop --harness.runtime.type") as refused:
            OpenEnvHarnessConfig(id="openenv-v1", runtime=runtime)
        assert "--harness.id null" in str(refused.value)
    OpenEnvHarnessConfig(id="openenv-v1", runtime=vf.SubprocessConfig())


def test_a_turn_limit_keeps_the_last_steps_account_on_the_trace(counter_url, tmp_path):
    """The rollout ends on `--max-turns` right after a tool call's step, with no stop
    run after it: `info.openenv` still has that step."""
    with policy_server("script", script=COUNTER_SCRIPT[:2]) as policy:
        flags = ("openenv-v1", "--taskset.base-url", counter_url, "--max-turns", "2")
        (trace,) = native_eval(policy, tmp_path, *flags)
    assert trace["errors"] == []
    assert trace["stop_condition"] == "max_turns"
    steps = trace["metrics"]["openenv_steps"]
    assert steps >= 2
    assert trace["info"]["openenv"]["steps"] == steps
    assert trace["info"]["openenv"]["reward"] == trace["rewards"]["openenv_reward"]


def test_wordle_plays_through_its_act_tool_on_a_shared_server(tmp_path):
    assert wordle_uv_servers() == []
    record = tmp_path / "requests.jsonl"
    with policy_server("solver", record=record) as policy:
        resets = '[{"seed": 4}, {"seed": 5}]'
        traces = native_eval(policy, tmp_path, *wordle_uv_flags(resets), "-c", "2")
    assert len(traces) == 2
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"] == 1.0
        assert_steps_between_model_calls(trace)
    assert_only_act_calls(recorded_requests(record))
    assert wordle_uv_servers() == []


def test_replies_without_a_tool_call_get_a_reminder_and_end_cleanly(
    counter_url, tmp_path
):
    record = tmp_path / "requests.jsonl"
    with policy_server("free-text", record=record) as policy:
        flags = ("openenv-v1", "--taskset.base-url", counter_url)
        (trace,) = native_eval(policy, tmp_path, *flags)
    assert_out_of_invalid_actions(trace, steps=0)
    last = recorded_requests(record)[-1]["messages"][-1]["content"]
    assert "a reply without a tool call does not step the environment" in last


def test_an_env_failure_ends_the_rollout_fast_with_the_cause(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with policy_server("solver") as policy:
        (trace,) = native_eval(
            policy, tmp_path, "openenv-v1", "--taskset.base-url", closed
        )
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    assert closed in error["message"] and "ECONNREFUSED" in error["message"]
    assert time.monotonic() - started < 60


def test_native_calls_run_through_the_env_server_workers(counter_url, tmp_path):
    """`eval --server`: rollouts run in verifiers' env-server workers (the path
    prime-rl trains through), each worker with its own tool server."""
    with policy_server("script", script=COUNTER_SCRIPT) as policy:
        traces = native_eval(
            policy,
            tmp_path,
            *("openenv-v1", "--taskset.base-url", counter_url),
            *("--taskset.resets", '[{"start": 1}, {"start": 1}]'),
            *("--server", "--no-rich"),
        )
    assert len(traces) == 2
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"] == 0.25 + 0.0 + 0.25 + 1.0


def test_the_taskset_declares_one_tool_server_for_the_eval_in_native_mode():
    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
    from openenv_v1.vf02.tools import OpenEnvTools

    url = "http://127.0.0.1:9"  # never reached: nothing is launched or connected
    with contextlib.closing(
        OpenEnvTaskset(OpenEnvConfig(base_url=url, tool_calls="native"))
    ) as native:
        (server,) = native.tool_servers()
        assert isinstance(server, OpenEnvTools) and server.server_name == ""
        (task,) = native.load()
        assert task.tool_servers() == []  # nothing launched per rollout
    with contextlib.closing(OpenEnvTaskset(OpenEnvConfig(base_url=url))) as text:
        assert text.tool_servers() == []


def test_native_refuses_a_user_simulator_off_this_host():
    """The tool server forwards calls to the simulator over loopback; Docker places
    the simulator on a Prime VM."""
    from openenv_v1 import OpenEnvConfig

    with pytest.raises(ValueError, match="tool_calls native needs the user simulator"):
        OpenEnvConfig(env="org/env", use_docker=True, tool_calls="native")
    OpenEnvConfig(env="org/env", use_docker=True)
