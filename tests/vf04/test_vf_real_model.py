"""A real LLM in the loop, offline (verifiers 0.4): the same as on 0.2
(`tests/test_real_model.py`) through `vf-eval`: SmolLM2-135M-Instruct on llama.cpp
plays the local Wordle env and the MCP counter env in text mode; every episode ends
on `openenv_done` or `max_turns`, none errors, each invalid reply gets feedback.
Marked `real_llm` (out of the default run; `.ci/run` runs it).
"""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.real_llm import MODEL_NAME, llama_server, require_installed
from tests.real_llm_checks import assert_episodes_ended_cleanly
from tests.test_real_model import MAX_TOKENS, MAX_TURNS
from tests.vf04.evals import run_vf_eval, traces_of

pytestmark = [pytest.mark.real_llm, pytest.mark.long]


@pytest.fixture(scope="module")
def llm_url() -> Iterator[str]:
    require_installed()
    with llama_server(max_tokens=MAX_TOKENS) as url:
        yield url


def llm_flags(url: str) -> list[str]:
    return [
        *("-m", MODEL_NAME, "--client.base-url", url),
        *("--client.api-key-var", "LOCAL_POLICY_KEY"),
        *("--env.player.max-turns", str(MAX_TURNS)),
        *("--env.taskset.max-invalid-actions", str(MAX_TURNS + 1)),
    ]


def test_a_real_llm_plays_wordle_and_an_mcp_env_in_text_mode(
    llm_url, wordle_url, counter_url, tmp_path
):
    runs = {
        "wordle": (
            ["openenv-v1", "--env.taskset.base-url", wordle_url]
            + ["--env.taskset.resets", '[{"seed": 1}, {"seed": 2}]'],
            2,
        ),
        "counter": (
            ["openenv-v1", "--env.taskset.base-url", counter_url]
            + ["--env.taskset.resets", '[{"start": 1}]'],
            1,
        ),
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {}
        for name, (args, _) in runs.items():
            cwd = tmp_path / name
            cwd.mkdir()
            futures[name] = pool.submit(
                run_vf_eval, [*args, "-c", "1", *llm_flags(llm_url)], cwd, 900.0
            )
        results = {name: future.result() for name, future in futures.items()}
    for name, (proc, episodes) in results.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        traces = traces_of(episodes)
        assert_episodes_ended_cleanly(traces, runs[name][1])
        for trace in traces:
            turns = sum(
                1 for n in trace["nodes"] if n["message"]["role"] == "assistant"
            )
            metrics = trace["metrics"]
            acted = metrics["openenv_steps"] + metrics["openenv_invalid_action_count"]
            # (a reply at the turn limit may be left unplayed)
            assert turns >= 1 and turns - 1 <= acted <= turns, (name, turns, metrics)
