"""Slow model turns keep their env session (verifiers 0.2).

A model that thinks longer than OpenEnv's WebSocket keepalive (a ping every 20 s,
20 s for its pong) must find its episode where it left it: a slow model is not a
slow env. The policy here waits `TURN_S` before each reply; two evals run side by
side, one on a `base_url` server and one on the taskset's shared UV-launched server
(leased over the pool's endpoint by the user simulator), each stepping the same
session after each slow turn.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.servers import (
    model_flags,
    policy_server,
    run_eval,
    wordle_uv_flags,
)

TURN_S = 46.0
"""Longer than OpenEnv's ping interval plus ping timeout (20 s + 20 s)."""


def assert_slow_turns_kept_the_session(trace: dict, turns: int) -> None:
    """`turns` model turns, each after at least `TURN_S`, each stepped on the one
    session the episode opened (a lost session fails the episode, see
    `EnvEpisode._apply`), and the game's own history carried through."""
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "max_turns"
    assert trace["metrics"]["openenv_steps"] == turns
    replies = [n for n in trace["nodes"] if n["message"]["role"] == "assistant"]
    assert len(replies) == turns
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
def test_two_46s_turns_keep_the_session_on_base_url_and_shared_uv(wordle_url, tmp_path):
    with policy_server("slow", delay=TURN_S) as policy:
        flags = ["--max-turns", "2", *model_flags(policy)]
        runs = {
            "base_url": (
                [
                    "openenv-v1",
                    "--taskset.base-url",
                    wordle_url,
                    "--taskset.resets",
                    '[{"seed": 3}]',
                ],
                tmp_path / "base_url",
            ),
            "shared_uv": (wordle_uv_flags('[{"seed": 4}]'), tmp_path / "shared_uv"),
        }
        for _, cwd in runs.values():
            cwd.mkdir()
        with ThreadPoolExecutor(len(runs)) as pool:
            done = {
                name: pool.submit(run_eval, [*args, *flags], cwd, 600.0)
                for name, (args, cwd) in runs.items()
            }
            results = {name: future.result() for name, future in done.items()}
    for name, (proc, traces) in results.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        (trace,) = traces
        assert_slow_turns_kept_the_session(trace, 2)
