"""What the model is shown: compact turns, schema once, history without repeats."""

import contextlib
import json

import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.episode.action_format import (
    MAX_TOOL_LIST_CHARS,
    render_action_format,
    render_invalid,
)
from openenv_v1.core.episode.schema import CALL_TOOL_SCHEMA, ActionSpec, Tool
from openenv_v1.core.episode.turns import TurnRenderer
from openenv_v1.core.episode.view import metadata_shown

SPEC = ActionSpec(
    {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }
)
INTRO = "You are Player 0 in Wordle. Guess the secret word in six tries."
FEEDBACK = "You submitted [crane].\nFeedback: G G X X Y"


def renderer(format: str = "text"):
    """One episode's turns as the episode renders them (`TurnRenderer`, which
    remembers what the model was shown): observation -> the turn's text."""
    turns = TurnRenderer(format)
    return lambda observation: turns.observation(observation).text


def render_observation(observation: dict) -> str:
    """The observation as a fresh episode's JSON-format turn."""
    return renderer("json")(observation)


def wordle_like(prompt: str, history: list[dict]) -> dict:
    return {
        "prompt": prompt,
        "messages": history,
        "legal_players": [0],
        "info": {},
        "metadata": {"reward_signals": {"greens": 0.4}},
    }


def test_text_format_shows_the_text_field_as_is_and_history_only_once():
    render = renderer("text")
    intro = {"id": -1, "content": INTRO, "category": "GAME"}
    first = render(wordle_like(INTRO, [intro]))
    # The history entry only copies the prompt; metadata and empty fields are left out.
    assert first == f"{INTRO}\nlegal_players: [0]"
    guess = {"id": 0, "content": "[crane]", "category": "PLAYER"}
    answer = {"id": -1, "content": FEEDBACK, "category": "GAME"}
    second = render(wordle_like(FEEDBACK, [intro, guess, answer]))
    assert second.splitlines()[:2] == FEEDBACK.splitlines()
    assert INTRO not in second  # shown in the first turn already
    assert f"messages: {json.dumps([guess], separators=(',', ':'))}" in second
    assert "legal_players: [0]" in second  # plain values are always shown
    assert "greens" not in second


def test_text_format_names_fields_when_there_is_no_single_text_field():
    render = renderer("text")
    shown = render({"board": "x..", "status": "your move", "score": 3})
    assert shown.splitlines() == ["board: x..", "status: your move", "score: 3"]


def test_json_format_is_the_whole_observation_every_turn():
    render = renderer("json")
    observation = wordle_like(INTRO, [{"id": -1, "content": INTRO}])
    assert render(observation) == render(observation) == render_observation(observation)
    assert json.loads(render(observation))["messages"] == [{"id": -1, "content": INTRO}]
    assert "metadata" not in render(observation)


TWO_FIELDS = ActionSpec(
    {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    }
)


def test_opening_carries_the_action_format_once():
    turns = TurnRenderer("text")
    opening = turns.opening(wordle_like(INTRO, []), TWO_FIELDS).text
    assert opening.startswith(INTRO)
    assert opening.count("Action schema:") == 1
    assert "Action schema" not in turns.observation(wordle_like(FEEDBACK, [])).text


def test_a_single_string_field_opening_gives_one_instruction_the_envs_own():
    """SmolLM2 told both "reply with your guess in square brackets" and "a JSON
    object matching this schema" wrote essays about JSON."""
    wordle = ActionSpec(
        {
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "message": {
                    "type": "string",
                    "description": "Your guess in square brackets, e.g. [crane].",
                },
            },
            "required": ["message"],
        }
    )
    opening = TurnRenderer().opening(wordle_like(INTRO, []), wordle).text
    instruction = opening.removeprefix(INTRO).split("\n\n", 1)[1]
    assert instruction == (
        "Reply with the message itself as plain text "
        "(Your guess in square brackets, e.g. [crane])."
    )
    assert "JSON" not in opening and "schema" not in opening
    with_option = ActionSpec(
        {
            "type": "object",
            "properties": {"message": {"type": "string"}, "hint": {"type": "boolean"}},
            "required": ["message"],
        }
    )
    assert "To also set hint, reply with a JSON object" in render_action_format(
        with_option
    )


def test_a_huge_tool_list_is_bounded_and_feedback_names_the_tools_only():
    tools = tuple(
        Tool(
            f"tool_{i}",
            "d" * 2_000,
            {"type": "object", "properties": {"a": {"type": "string"}}},
        )
        for i in range(1_000)
    )
    spec = ActionSpec(CALL_TOOL_SCHEMA, tools)
    opening = render_action_format(spec)
    assert len(opening) < MAX_TOOL_LIST_CHARS + 1_000
    assert "more tools not shown; their names: tool_" in opening
    assert opening.count("d" * 500 + " [...]") >= 1 and "d" * 501 not in opening
    # One tool with a huge input schema still shows its arguments.
    huge = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "q" * 50_000},
            "limit": {"type": "integer"},
        },
        "required": ["query"],
    }
    one = render_action_format(
        ActionSpec(CALL_TOOL_SCHEMA, (Tool("search", "", huge),))
    )
    assert len(one) < 2_500 and "q" * 100 not in one
    assert "arguments: query (string, required), limit (integer) [schema of" in one
    feedback = render_invalid("the tool call is invalid", spec, 2)
    assert len(feedback) < 2_500
    assert "tool_0, tool_1, tool_2" in feedback and "more." in feedback
    assert "d" * 20 not in feedback and "arguments schema" not in feedback


# --- Observations whose content is only in `metadata` (OpenEnv >= 0.10 wire shape:
# the observation dict carries `metadata` but not `done` / `reward`).

FINQA_RESET = {
    "metadata": {
        "question": "What was Alphabet's effective tax rate in 2023?",
        "company": "alphabet",
        "tool_result": "",
        "history": [],
        "step_count": 0,
        "available_tools": ["get_descriptions", "sql_query", "submit_answer"],
        "reward_signals": {"format": 0.0},
    }
}


def test_metadata_only_observation_shows_the_task_as_text():
    shown = renderer("text")(FINQA_RESET)
    assert shown.splitlines() == [
        "question: What was Alphabet's effective tax rate in 2023?",
        "company: alphabet",
        "step_count: 0",
        'available_tools: ["get_descriptions","sql_query","submit_answer"]',
    ]


def test_metadata_only_observation_shows_the_task_as_json():
    for render in (renderer("json"), render_observation):
        assert json.loads(render(FINQA_RESET)) == {
            "question": "What was Alphabet's effective tax rate in 2023?",
            "company": "alphabet",
            "step_count": 0,
            "available_tools": ["get_descriptions", "sql_query", "submit_answer"],
        }


def test_metadata_only_ignores_done_and_reward_in_the_observation():
    # Servers that leave `done` / `reward` in the observation dict still count as
    # metadata-only, and those two are not shown.
    observation = {"done": False, "reward": 0.0, "metadata": {"note": "starts at 3"}}
    assert renderer("text")(observation) == "starts at 3"
    assert render_observation(observation) == '{"note":"starts at 3"}'


def test_reward_signal_keys_are_never_shown():
    signals = {
        "reward_signals": {"greens": 0.4},
        "rewards": {"win": 1.0},
        "reward_components": {"length": -0.1},
    }
    observation = {"metadata": {**signals, "hint": "try a vowel"}}
    for format in ("text", "json"):
        shown = renderer(format)(observation)
        assert "try a vowel" in shown
        assert not any(word in shown for word in ("greens", "win", "length"))
    # Metadata holding only reward signals shows nothing, as before.
    assert renderer("text")({"metadata": signals}) == ""
    assert render_observation({"metadata": signals}) == "{}"


def test_metadata_stays_hidden_when_the_observation_has_content():
    observation = {"prompt": "Guess a word.", "metadata": {"answer": "crane"}}
    assert renderer("text")(observation) == "Guess a word."
    assert render_observation(observation) == '{"prompt":"Guess a word."}'


# --- MCP tool calls: OpenEnv's CallToolObservation, as fastmcp results arrive.


def tool_call(tool: str, result=None, error=None) -> dict:
    return {"metadata": {}, "tool_name": tool, "result": result, "error": error}


def envelope(data, structured, content, is_error=False, meta=None) -> dict:
    return {
        "content": content,
        "structured_content": structured,
        "meta": meta,
        "data": data,
        "is_error": is_error,
    }


def text_part(text: str) -> dict:
    return {"type": "text", "text": text, "annotations": None, "meta": None}


def both(observation: dict) -> tuple[str, str]:
    """The observation in the text and the json format."""
    return renderer("text")(observation), render_observation(observation)


WRAPPED = {"fastmcp": {"wrap_result": True}}


def test_tool_result_shows_its_data():
    add = tool_call("add", envelope(3, {"result": 3}, [text_part("3")], meta=WRAPPED))
    assert both(add) == ("add: 3", '{"add":3}')
    record = {"a": 1, "b": [1, 2]}
    rec = tool_call("rec", envelope(record, record, [text_part('{"a":1,"b":[1,2]}')]))
    assert both(rec) == ('rec: {"a":1,"b":[1,2]}', '{"rec":{"a":1,"b":[1,2]}}')
    hello = envelope("hello world", {"result": "hello world"}, [text_part("hello")])
    assert both(tool_call("echo", hello)) == (
        "echo: hello world",
        '{"echo":"hello world"}',
    )


def test_tool_result_falls_back_to_structured_content():
    lone = tool_call("lst", envelope(None, {"result": [1, 2]}, [text_part("[1,2]")]))
    assert both(lone) == ("lst: [1,2]", '{"lst":[1,2]}')
    record = tool_call("rec", envelope(None, {"x": 3}, [text_part('{"x":3}')]))
    assert both(record) == ('rec: {"x":3}', '{"rec":{"x":3}}')
    # The MCP SDK's camelCase spelling reads the same.
    camel = {"content": [], "structuredContent": {"result": 7}, "isError": False}
    assert both(tool_call("seven", camel)) == ("seven: 7", '{"seven":7}')


def test_tool_result_falls_back_to_its_text_content():
    parts = [text_part("line one"), text_part("line two")]
    shown = both(tool_call("read", envelope(None, None, parts)))
    assert shown == ("read: line one\nline two", '{"read":"line one\\nline two"}')


def test_tool_result_summarizes_images():
    image = {
        "type": "image",
        "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
        "mimeType": "image/png",
        "annotations": None,
        "meta": None,
    }
    shot = tool_call("shot", envelope(None, None, [text_part("the page"), image]))
    assert both(shot) == (
        "shot: the page\n[image/png]",
        '{"shot":"the page\\n[image/png]"}',
    )


def test_tool_returning_nothing_says_null():
    assert both(tool_call("noop", envelope(None, None, []))) == (
        "noop: null",
        '{"noop":null}',
    )


def test_tool_call_error_is_an_error_line():
    failed = tool_call(
        "boom",
        error={
            "error_type": "execution_error",
            "message": "Error calling tool 'boom': no such thing",
        },
    )
    assert both(failed) == (
        "error: execution_error: Error calling tool 'boom': no such thing",
        '{"error":"execution_error: Error calling tool \'boom\': no such thing"}',
    )
    missing = tool_call(
        "nope", error={"error_type": "tool_not_found", "message": "Unknown tool"}
    )
    assert both(missing)[0] == "error: tool_not_found: Unknown tool"


def test_tool_result_with_is_error_is_an_error_line():
    result = envelope(None, None, [text_part("division by zero")], is_error=True)
    assert both(tool_call("div", result)) == (
        "error: division by zero",
        '{"error":"division by zero"}',
    )


def test_tool_results_are_shown_whole_every_time():
    # A list of records from a tool is its answer, not a history: a second call
    # shows it again.
    tables = [{"name": "revenue"}, {"name": "tax"}]
    observation = tool_call("tables", envelope(tables, None, []))
    render = renderer("text")
    assert render(observation) == render(observation)
    assert render(observation) == f"tables: {json.dumps(tables, separators=(',', ':'))}"


def test_tool_call_keeps_extra_fields_but_not_its_envelope():
    observation = {
        **tool_call("add", envelope(3, {"result": 3}, [text_part("3")])),
        "step_count": 4,
        "metadata": {"reward_signals": {"x": 1.0}},
    }
    assert both(observation) == ("add: 3\nstep_count: 4", '{"add":3,"step_count":4}')


def test_non_mcp_observations_with_similar_fields_render_as_before():
    # Without all of tool_name, result and error it is not a tool call.
    observation = {"tool_name": "sql", "result": {"content": [], "data": 1}}
    assert both(observation) == (
        'tool_name: sql\nresult: {"content":[],"data":1}',
        '{"tool_name":"sql","result":{"content":[],"data":1}}',
    )


@pytest.mark.parametrize("server", ["counter_url", "subclassed_counter_url"])
async def test_real_mcp_env_turns_are_compact(server, request):
    url = request.getfixturevalue(server)
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(EnvTarget(base_url=url), EpisodeLimits(), stack)
        opening = (await episode.reset({"start": 1})).text
        # The counter's reset observation has only metadata: {"note": ...}.
        assert opening.startswith("counter starts at 1\n\n")
        added = (await episode.act('{"tool_name": "add", "arguments": {"n": 2}}')).text
        assert added == "add: 3"
        for noise in ("structured_content", "is_error", "meta", "content", "{"):
            assert noise not in added
        peek = (await episode.act('{"tool_name": "peek"}')).text
        submit = '{"tool_name": "submit", "arguments": {"answer": 3}}'
        assert (peek, (await episode.act(submit)).text) == (
            "peek: 3",
            "submit: correct",
        )


async def test_real_mcp_env_turns_in_json(counter_url):
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(
            EnvTarget(base_url=counter_url),
            EpisodeLimits(),
            stack,
            observation_format="json",
        )
        opening = (await episode.reset({})).text
        assert opening.startswith('{"note":"counter starts at 0"}\n\n')
        added = await episode.act('{"tool_name": "add", "arguments": {"n": 2}}')
        assert added.text == '{"add":2}'


def test_metadata_is_reported_as_shown_only_when_it_is_all_there_is():
    task = {"metadata": {"question": "What is 17 + 25?"}}
    assert metadata_shown(task)
    assert not metadata_shown({"prompt": "guess", "metadata": {"seed": 1}})
    assert not metadata_shown({"metadata": {"reward_signals": {"win": 1.0}}})
