"""One episode against real OpenEnv servers on 127.0.0.1 (base_url mode)."""

import contextlib
import json

import pytest
from openenv import GenericEnvClient

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.episode.schema import fetch_action_spec
from openenv_v1.wordle_solver import next_guess


@contextlib.asynccontextmanager
async def episode_at(url: str, **limits):
    async with contextlib.AsyncExitStack() as stack:
        yield await open_episode(
            EnvTarget(base_url=url), EpisodeLimits(**limits), stack
        )


async def test_reset_observation_opens_with_the_action_format_once(wordle_url):
    async with episode_at(wordle_url) as episode:
        opening = (await episode.reset({"seed": 3})).text
        assert "You are Player 0 in Wordle" in opening
        # Wordle's one string field: the env's own format, from its field description.
        assert opening.endswith(
            "Reply with the message itself as plain text "
            "(Your guess in square brackets, e.g. [crane])."
        )
        later = (await episode.act("[crane]")).text
        assert "You submitted [crane]" in later
        assert "Reply with" not in later


async def test_solved_game_sums_rewards_and_stops(wordle_url):
    async with episode_at(wordle_url) as episode:
        text = (await episode.reset({"word": "crane"})).text
        for guess in ["[slate]", '{"message": "[brine]"}', "crane"]:
            text = (await episode.act(guess)).text
        report = episode.report
        assert (report.done, report.stop_reason, report.steps) == (True, "done", 3)
        assert report.reward == 1.0
        assert report.signals["correct"] == 1.0
        assert "Congratulations" in text


async def test_no_step_after_done(wordle_url):
    async with episode_at(wordle_url) as episode:
        await episode.reset({"word": "crane"})
        await episode.act("[crane]")
        assert episode.report.done
        # The server would step a finished game into an error; we never send it.
        assert (await episode.act("[slate]")).text == "The episode is over."
        assert (episode.report.steps, episode.report.error) == (1, None)


async def test_lost_game_pays_partial_credit_once(wordle_url):
    async with episode_at(wordle_url) as episode:
        await episode.reset({"word": "crane"})
        for guess in ["slate", "brine", "plumb", "dough", "fizzy", "tacit"]:
            await episode.act(f"[{guess}]")
        report = episode.report
        assert report.done and report.steps == 6
        # Best guess "brine": r, n, e green, i gray, b gray -> 3/5; halved.
        assert report.reward == pytest.approx(0.3)


async def test_invalid_replies_get_feedback_and_are_bounded(wordle_url):
    async with episode_at(wordle_url, max_invalid_actions=3) as episode:
        await episode.reset({"seed": 1})
        first = (await episode.act('{"guess": "crane"}')).text
        assert "missing required field 'message'" in first
        assert "not stepped" in first and "Reply with the message itself" in first
        await episode.act("")
        assert not episode.report.done
        last = (await episode.act("   ")).text
        report = episode.report
        assert (report.done, report.stop_reason) == (True, "invalid_actions")
        assert (report.steps, report.invalid_actions) == (0, 3)
        assert "episode is over" in last


async def test_a_valid_step_resets_the_invalid_streak(wordle_url):
    async with episode_at(wordle_url, max_invalid_actions=2) as episode:
        await episode.reset({"seed": 1})
        await episode.act("")
        await episode.act(f"[{next_guess('')}]")
        await episode.act("")
        assert not episode.report.done
        assert episode.report.invalid_actions == 2


async def test_rejected_reset_kwargs_name_the_env_error(wordle_url):
    from openenv_v1.core import EnvFailure

    async with episode_at(wordle_url) as episode:
        with pytest.raises(EnvFailure, match="word='zzzzq' is not a five-letter word"):
            await episode.reset({"word": "zzzzq"})


def result_of(turn: str, tool: str):
    """A tool's result as the text format shows it: `<tool>: <value>`."""
    (line,) = [t for t in turn.splitlines() if t.startswith(f"{tool}: ")]
    return json.loads(line.removeprefix(f"{tool}: "))


async def test_mcp_tools_are_discovered_and_called(counter_url):
    async with episode_at(counter_url) as episode:
        assert [t.name for t in episode.spec.tools] == ["add", "peek", "submit"]
        opening = (await episode.reset({"start": 1})).text
        assert "- submit: Submit the final counter value" in opening
        replies = [
            '{"tool_name": "add", "arguments": {"n": 2}}',
            '{"type": "call_tool", "tool_name": "peek"}',
            '{"tool_name": "add", "arguments": {"n": 4}}',
            '{"tool_name": "submit", "arguments": {"answer": 7}}',
        ]
        texts = [(await episode.act(r)).text for r in replies]
        assert result_of(texts[1], "peek") == 3
        report = episode.report
        assert report.reward == 0.25 + 0.0 + 0.25 + 1.0
        assert (report.steps, report.done, report.stop_reason) == (4, True, "done")


async def test_subclassed_call_tool_actions_fall_back_to_json_rpc(
    subclassed_counter_url,
):
    async with GenericEnvClient(base_url=subclassed_counter_url) as client:
        # The list_tools step really fails here ...
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            await client.step({"type": "list_tools"})
        # ... and discovery still finds the tools.
        spec = await fetch_action_spec(client, subclassed_counter_url)
    assert [t.name for t in spec.tools] == ["add", "peek", "submit"]
    async with episode_at(subclassed_counter_url) as episode:
        await episode.reset({})
        await episode.act('{"tool_name": "add", "arguments": {"n": 5}}')
        await episode.act('{"tool_name": "submit", "arguments": {"answer": 5}}')
        assert (episode.report.reward, episode.report.done) == (1.25, True)


async def test_sessions_on_one_server_are_isolated(counter_url):
    async with episode_at(counter_url) as a, episode_at(counter_url) as b:
        await a.reset({"start": 10})
        await b.reset({"start": 0})
        await a.act('{"tool_name": "add", "arguments": {"n": 1}}')
        peek = (await b.act('{"tool_name": "peek"}')).text
        assert result_of(peek, "peek") == 0


async def test_an_mcp_tool_error_is_a_step_that_counts_as_invalid(counter_url):
    async with episode_at(counter_url, max_invalid_actions=2) as episode:
        await episode.reset({})
        turn = await episode.act('{"tool_name": "add", "arguments": {"n": 500}}')
        assert "n=500 is over 100" in turn.text and turn.failed
        assert "1 more invalid action in a row will end the episode" in turn.text
        await episode.act('{"tool_name": "add", "arguments": {"n": 1}}')
        assert episode.report.invalid_streak == 0  # a good step ends the streak
        await episode.act('{"tool_name": "add", "arguments": {"n": 500}}')
        turn = await episode.act('{"tool_name": "add", "arguments": {"n": 501}}')
        report = episode.report
        assert "the episode is over" in turn.text
        assert (report.steps, report.invalid_actions) == (4, 3)
        assert (report.reward, report.stop_reason) == (0.25, "invalid_actions")
