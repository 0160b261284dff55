"""What OpenEnv's real envs showed the adapter getting wrong (issue 28), on small
envs of the same shapes (`tests/envs/real_shapes.py`) served on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_v1.cli.check import CheckOptions, CheckReport, run_check
from openenv_v1.cli.check_text import render_report
from openenv_v1.cli.hints import hint_for
from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.episode.action_format import render_action_format
from openenv_v1.core.episode.schema import ActionSpec
from tests.envs.real_shapes import (
    OUTPUT_TAIL,
    TASK_ANSWER,
    TASK_QUESTION,
)
from tests.servers import (
    ROOT,
    TEST_ENVS,
    model_flags,
    policy_server,
    run_eval,
    serve_on_free_port,
    stop,
    uvicorn_server,
    without_gradio,
)

VF04_PYTHON = ROOT / ".venv-vf04" / "bin" / "python"
needs_vf04 = pytest.mark.skipif(
    not VF04_PYTHON.exists() and not os.environ.get("CI"),
    reason="serves an openenv-core 0.3.0 env from .venv-vf04: run "
    "`UV_PROJECT_ENVIRONMENT=.venv-vf04 uv sync --locked --extra vf04 --no-group vf02`",
)
"""An interpreter with openenv-core 0.3.0, whose server strips `metadata`."""
VF02_PYTHON = ROOT / ".venv" / "bin" / "python"
"""An interpreter with openenv 0.10, whose server keeps it."""


@contextlib.contextmanager
def served(app: str, python: Path | str = sys.executable) -> Iterator[str]:
    """`tests/envs/real_shapes.py`'s `app` served by uvicorn from `python`'s env."""

    def command(port: int) -> list[str]:
        return [
            str(python), "-m", "uvicorn", f"real_shapes:{app}",
            "--app-dir", str(TEST_ENVS), "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning", "--timeout-graceful-shutdown", "1",
        ]  # fmt: skip

    proc, port = serve_on_free_port(command, "/health", without_gradio(os.environ))
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.asynccontextmanager
async def episode_at(url: str, **kwargs):
    async with contextlib.AsyncExitStack() as stack:
        limits = EpisodeLimits(max_invalid_actions=3, step_timeout_s=20)
        yield await open_episode(EnvTarget(base_url=url), limits, stack, **kwargs)


def example_of(text: str) -> dict:
    (line,) = [t for t in text.splitlines() if t.startswith("Example: ")]
    return json.loads(line.removeprefix("Example: "))


async def test_the_example_is_an_action_the_env_takes_and_the_docstring_is_shown():
    with served("vector_app") as url:
        async with episode_at(url) as episode:
            opening = (await episode.reset({})).text
            # The docstring states what the schema cannot, in text mode too.
            assert (
                'The action: Push the cart with two forces. Use mode "pull"' in opening
            )
            example = example_of(opening)
            assert len(example["values"]) == 2 and 0.5 <= example["gain"] <= 2.0
            await episode.act(json.dumps(example))
            assert (episode.report.steps, episode.report.reward) == (1, 1.0)
            # The server's own validation detail reaches the model.
            refused = await episode.act('{"values": [1, 1], "mode": "pull", "gain": 1}')
            assert "mode 'pull' needs gain 2.0" in refused.text
            assert episode.report.invalid_actions == 1 and episode.report.steps == 1


def test_no_example_when_none_satisfies_the_schema():
    spec = ActionSpec(
        schema={
            "type": "object",
            "properties": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
            "required": ["code"],
        }
    )
    assert spec.example() is None
    assert "Example" not in render_action_format(spec)
    tuple_spec = ActionSpec(
        schema={
            "type": "object",
            "properties": {
                "move": {
                    "type": "array",
                    "prefixItems": [{"type": "integer", "minimum": 1}, {"const": "x"}],
                    "minItems": 2,
                    "maxItems": 2,
                }
            },
        }
    )
    assert tuple_spec.example() == {"move": [1, "x"]}


async def test_an_illegal_move_the_env_raises_on_is_the_models_invalid_action():
    with served("board_app") as url:
        async with episode_at(url) as episode:
            await episode.reset({"hide_legal": True})
            await episode.act('{"cell": 0}')
            refused = (await episode.act('{"cell": 4}')).text
            report = episode.report
            assert "Action 4 is not legal: the cell is taken" in refused
            assert (report.error, report.done, report.invalid_actions) == (
                None,
                False,
                1,
            )
            assert report.reward == 0.5  # kept
            await episode.act('{"cell": 1}')
            assert (report.steps, report.invalid_streak, report.error) == (2, 0, None)


async def test_a_step_the_env_code_breaks_on_is_the_episodes_error():
    with served("board_app") as url:
        async with episode_at(url) as episode:
            await episode.reset({"broken": True})
            await episode.act('{"cell": 0}')
            report = episode.report
            assert report.stop_reason == "error"
            assert "has no attribute 'model_dump'" in report.error


async def test_legal_actions_in_the_observation_are_checked_before_stepping():
    with served("board_app") as url:
        async with episode_at(url) as episode:
            await episode.reset({})
            refused = (await episode.act('{"cell": 4}')).text
            assert "cell=4 is not one of the observation's legal_actions" in refused
            assert (episode.report.steps, episode.report.error) == (0, None)


async def test_tools_are_listed_after_reset_and_after_a_step_that_reports_them():
    with served("late_tools_app") as url:
        async with episode_at(url) as episode:
            assert episode.spec.tools == ()  # before reset: none yet
            opening = (await episode.reset({})).text
            assert "- list_notes: List the scenario's notes." in opening
            notes = (await episode.act('{"tool_name": "list_notes"}')).text
            assert "groceries" in notes
            unlocked = (await episode.act('{"tool_name": "unlock"}')).text
            assert "The tools changed" in unlocked and "- read_secret:" in unlocked
            await episode.act('{"tool_name": "read_secret"}')
            report = episode.report
            assert (report.steps, report.reward, report.stop_reason) == (3, 1.0, "done")


@needs_vf04
async def test_a_metadata_task_reaches_the_model_from_an_openenv_core_030_server():
    # openenv-core 0.3.0 strips `metadata` from /ws replies: the task is read from
    # the session's state, less its answer.
    with served("metadata_task_app", VF04_PYTHON) as url:
        async with episode_at(url) as episode:
            opening = (await episode.reset({})).text
            assert TASK_QUESTION in opening and TASK_ANSWER not in opening
            assert (episode.task.source, episode.task.hidden) == (
                "state",
                ["ground_truth"],
            )
        report = CheckReport(target={"base_url": url})
        await run_check(CheckOptions(EnvTarget(base_url=url), probe_sessions=0), report)
        assert report.ok, report.failure
        assert TASK_QUESTION in report.reset.turn
        (warning,) = [w for w in report.warnings if "shows the model nothing" in w]
        assert "strip it from /ws replies" in warning and "ground_truth" in warning


@pytest.mark.skipif(not VF02_PYTHON.exists(), reason="needs the .venv env")
async def test_a_metadata_task_shows_from_metadata_on_an_openenv_010_server():
    with served("metadata_task_app", VF02_PYTHON) as url:
        async with episode_at(url) as episode:
            opening = (await episode.reset({})).text
            assert TASK_QUESTION in opening and episode.task.source == "observation"


@needs_vf04
async def test_check_warns_when_the_task_never_reaches_the_model():
    with served("late_tools_app", VF04_PYTHON) as url:
        report = CheckReport(target={"base_url": url})
        await run_check(CheckOptions(EnvTarget(base_url=url), probe_sessions=0), report)
        assert report.ok, report.failure
        assert [t.name for t in report.tools] == ["list_notes", "unlock"]
        assert any("the task never reaches the model" in w for w in report.warnings)


async def test_the_capacity_probe_resets_each_session():
    with served("fragile_app") as url:
        report = CheckReport(target={"base_url": url})
        await run_check(CheckOptions(EnvTarget(base_url=url), probe_sessions=3), report)
        assert report.sessions.status == "reset failed", report.sessions
        assert report.sessions.accepted == 1
        assert "cannot switch to a different thread" in report.sessions.error
        assert "session 2 opened but its reset failed" in render_report(report)


async def test_terminal_turns_keep_tails_name_copies_and_send_what_is_new():
    with served("terminal_app") as url:
        async with episode_at(url, max_observation_chars=4_000) as episode:
            opening = (await episode.reset({})).text
            assert "axtree_txt: (same as text)" in opening
            assert "[999] button 'Submit'" in opening  # the page's end survives
            assert OUTPUT_TAIL in opening  # so does the terminal's last line
            second = (await episode.act('{"command": "ls"}')).text
            assert "instruction: (unchanged since the last turn)" in second
            assert "rewards_so_far: [0.1]" in second
            third = (await episode.act('{"command": "ls"}')).text
            assert "rewards_so_far (+1 new): [0.2]" in third
            assert OUTPUT_TAIL in third


async def test_check_json_gives_image_sizes_not_pixels():
    with uvicorn_server("pixel_envs:browser_app", app_dir=TEST_ENVS) as url:
        report = CheckReport(target={"base_url": url})
        options = CheckOptions(EnvTarget(base_url=url), probe_sessions=0)
        await run_check(options, report)
        data = report.to_json()
        assert data["reset"]["observation"]["screenshot"] == {
            "image": "96x128x3",
            "pixels": 96 * 128 * 3,
        }
        assert len(json.dumps(data)) < 200_000


def test_the_reset_kwargs_hint_is_given_only_for_a_reset_with_kwargs():
    error = "reset failed: RuntimeError: no browser"
    assert "--reset: its keys" in hint_for("reset", error, reset_keys=True)
    assert "--reset: its keys" not in hint_for("reset", error, reset_keys=False)


@pytest.mark.skipif(not VF02_PYTHON.exists(), reason="the verifiers 0.2 eval")
def test_a_rollout_the_env_fails_is_logged_once(tmp_path):
    # verifiers logs each answer to the harness's model call; a 5xx one is retried
    # twice by the harness's OpenAI client: three lines for one failure.
    script = ['{"cell": 0}']
    with served("board_app") as url, policy_server("script", script=script) as p:
        resets = json.dumps([{"broken": True}])
        flags = ["--taskset.base-url", url, "--taskset.resets", resets]
        proc, traces = run_eval(["openenv-v1", *flags, *model_flags(p)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ((error,),) = [t["errors"] for t in traces]
    assert error["type"] == "UserError" and "model_dump" in error["message"]
    (log,) = tmp_path.rglob("eval.log")
    failed = [ln for ln in log.read_text().splitlines() if " failed: UserError" in ln]
    assert len(failed) == 1, failed
