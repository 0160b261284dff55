"""verifiers 0.4: a `base_url` list, as `vf-eval` takes it (`--env.taskset.base-url`
with the list as JSON): one eval spread over three running servers, leased in the
eval process, and one of them SIGKILLed costing no episode (test_base_urls.py is
the 0.2 line's)."""

import contextlib
import json
import os
import signal

import httpx

from tests.servers import TEST_ENVS, model_flags, policy_server
from tests.test_base_urls import RESETS, sessions_opened
from tests.vf04.conftest import sync_wordle_project, wordle_project_app
from tests.vf04.evals import run_vf_eval
from tests.vf04.test_vf_eval import assert_all_done


def vf_eval_over(urls: list[str], policy: str, cwd) -> tuple:
    cwd.mkdir()
    return run_vf_eval(
        [
            "openenv-v1",
            "--env.taskset.base-url",
            json.dumps(urls),
            "--env.taskset.resets",
            RESETS,
            "-c",
            "3",
            *model_flags(policy),
        ],
        cwd,
    )


def test_an_eval_spreads_over_its_base_urls_and_loses_nothing_to_a_killed_one(
    tmp_path,
):
    venv = tmp_path / "wordle-venv"
    sync_wordle_project(venv)
    with contextlib.ExitStack() as servers:
        a, b, c = (
            servers.enter_context(
                wordle_project_app(venv, "counted_wordle:app", TEST_ENVS)
            )
            for _ in range(3)
        )
        policy = servers.enter_context(policy_server("solver"))
        proc, episodes = vf_eval_over([a, b, c], policy, tmp_path / "spread")
        traces = assert_all_done(proc, episodes, 6)
        assert [t["rewards"]["openenv_reward"]["score"] for t in traces] == [1.0] * 6
        assert sorted(t["task"]["data"]["name"] for t in traces) == [
            f"{a}#{i}" for i in range(6)
        ]
        spread = [sessions_opened(url) for url in (a, b, c)]
        assert sum(spread) == 6 and min(spread) >= 1, spread
        os.kill(int(httpx.get(f"{a}/test/pid", timeout=10).text), signal.SIGKILL)
        proc, episodes = vf_eval_over([a, b, c], policy, tmp_path / "killed")
        assert_all_done(proc, episodes, 6)
        assert sessions_opened(b) + sessions_opened(c) == sum(spread[1:]) + 6
        # A rollout was sent to it, found it gone, and took it out for the others.
        logs = (tmp_path / "killed").glob("outputs/*/logs/*/eval.log")
        said = "".join(log.read_text() for log in logs)
        assert f"env server {a} could not be reached" in said
