"""Slow model turns keep their env session (verifiers 0.4).

As on 0.2 (`tests/test_real_model_slow_turns.py`): turns longer than OpenEnv's
keepalive (ping interval + ping timeout), here on the env process's own event loop,
which also runs the model calls: a `base_url` server and a UV launch of the rollout's
own (`shared_servers` off), side by side.
"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.servers import WORDLE_APP, WORDLE_PROJECT, model_flags, policy_server
from tests.test_real_model_slow_turns import TURN_S
from tests.vf04.evals import run_vf_eval, traces_of


def assert_slow_turns_kept_the_session(trace: dict, turns: int) -> None:
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "max_turns"
    assert trace["metrics"]["openenv_steps"] == turns
    # Each model call (as the trace times it) took the policy's whole wait.
    calls = [c["time"]["end"] - c["time"]["start"] for c in trace["calls"]]
    assert len(calls) == turns and min(calls) >= TURN_S - 1, calls
    # Each answered step was the next guess of the one game, not a new game's first.
    users = [n for n in trace["nodes"] if n["message"]["role"] == "user"]
    answered = len(users) - 1  # after the opening
    assert answered >= 1
    assert f"You have {6 - answered} guesses left" in str(
        users[-1]["message"]["content"]
    )


@pytest.mark.long
def test_two_46s_turns_keep_the_session_on_base_url_and_own_uv_launch(
    wordle_url, tmp_path
):
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    with policy_server("slow", delay=TURN_S) as policy:
        flags = ["--env.player.max-turns", "2", *model_flags(policy)]
        runs = {
            "base_url": (
                ["--env.taskset.base-url", wordle_url],
                tmp_path / "base_url",
            ),
            "own_uv": (
                ["--env.taskset.env", "local/wordle"]
                + ["--env.taskset.provider-kwargs", kwargs]
                + ["--env.taskset.shared-servers", "false"],
                tmp_path / "own_uv",
            ),
        }
        for _, cwd in runs.values():
            cwd.mkdir()
        with ThreadPoolExecutor(len(runs)) as pool:
            done = {
                name: pool.submit(
                    run_vf_eval,
                    ["openenv-v1", *args, "--env.taskset.resets", '[{"seed": 3}]']
                    + flags,
                    cwd,
                    600.0,
                )
                for name, (args, cwd) in runs.items()
            }
            results = {name: future.result() for name, future in done.items()}
    for name, (proc, episodes) in results.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        (trace,) = traces_of(episodes)
        assert_slow_turns_kept_the_session(trace, 2)
