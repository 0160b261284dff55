"""A real LLM in the loop, offline (verifiers 0.2): SmolLM2-135M-Instruct served by
llama.cpp on 127.0.0.1 (`tests/real_llm.py`) plays the local Wordle env and the MCP
counter env in text mode through `eval`.

A 135M model rarely solves anything; what is checked is what its replies do to the
adapter: every episode ends on `openenv_done` or `max_turns` (invalid replies are
allowed up to the turn limit), none errors, and each invalid reply is answered with
feedback. Its output is not repeatable (the prompt cache changes greedy decoding),
so no text is asserted. Marked `real_llm`: out of the default run, run by `.ci/run`
(`uv run pytest -m real_llm`), which installs the model and server first.
"""

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.real_llm import MODEL_NAME, llama_server, require_installed
from tests.real_llm_checks import assert_episodes_ended_cleanly
from tests.servers import run_eval

pytestmark = [pytest.mark.real_llm, pytest.mark.long]

MAX_TURNS = 5
MAX_TOKENS = 64
"""Each reply's token limit: room for an action and some prose around it. The model
spends ~70% of its CPU generating (~45 tokens/s on one thread here), and most of its
replies ran to the server's default of 128; a reply cut off at the limit is one more
reply the adapter must take (verifiers 0.4 passes `finish_reason: length` on, and
such a reply is answered as cut off)."""


@pytest.fixture(scope="module")
def llm_url() -> Iterator[str]:
    require_installed()
    with llama_server(max_tokens=MAX_TOKENS) as url:
        yield url


def llm_flags(url: str) -> list[str]:
    """The model flags, and limits under which only `done` or `max_turns` end an
    episode (a small model's invalid replies do not run out first)."""
    return [
        *("-m", MODEL_NAME, "--client.base-url", url),
        *("--client.api-key-var", "LOCAL_POLICY_KEY"),
        *("--max-turns", str(MAX_TURNS)),
        *("--taskset.task.user.max-invalid-actions", str(MAX_TURNS + 1)),
    ]


def test_a_real_llm_plays_wordle_and_an_mcp_env_in_text_mode(
    llm_url, wordle_url, counter_url, tmp_path
):
    runs = {
        "wordle": (
            ["openenv-v1", "--taskset.base-url", wordle_url]
            + ["--taskset.resets", '[{"seed": 1}, {"seed": 2}]'],
            2,
        ),
        "counter": (
            ["openenv-v1", "--taskset.base-url", counter_url]
            + ["--taskset.resets", '[{"start": 1}]'],
            1,
        ),
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        futures = {}
        for name, (args, _) in runs.items():
            cwd = tmp_path / name
            cwd.mkdir()
            futures[name] = pool.submit(
                run_eval, [*args, "-c", "1", *llm_flags(llm_url)], cwd, 900.0
            )
        results = {name: future.result() for name, future in futures.items()}
    for name, (proc, traces) in results.items():
        assert proc.returncode == 0, (name, proc.stderr[-3000:])
        assert_episodes_ended_cleanly(traces, runs[name][1])
        for trace in traces:
            # Real replies reached the env: each turn was a step or an invalid reply.
            turns = sum(
                1 for n in trace["nodes"] if n["message"]["role"] == "assistant"
            )
            metrics = trace["metrics"]
            acted = metrics["openenv_steps"] + metrics["openenv_invalid_action_count"]
            # (a reply at the turn limit may be left unplayed)
            assert turns >= 1 and turns - 1 <= acted <= turns, (name, turns, metrics)
