"""Turning model replies into actions: accepted forms and precise refusals."""

import http.server
import threading
from typing import Annotated, Union

import pytest
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from pydantic import Field, TypeAdapter

from openenv_v1.core.episode.actions import (
    InvalidAction,
    call_to_action,
    parse_action,
    text_tool_call,
)
from openenv_v1.core.episode.schema import (
    CALL_TOOL_SCHEMA,
    ActionSpec,
    Tool,
    is_mcp_action,
)

WORDLE = ActionSpec(
    schema={
        "title": "WordleAction",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "metadata": {"type": "object"},
            "message": {"type": "string"},
        },
        "required": ["message"],
    }
)
TWO_FIELDS = ActionSpec(
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x", "y"],
    }
)
COUNTER = ActionSpec(
    schema=CALL_TOOL_SCHEMA,
    tools=(
        Tool(
            "add",
            "Add n.",
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        ),
        Tool("peek", "Peek.", {}),
    ),
)


@pytest.mark.parametrize(
    "reply",
    [
        '{"message": "[crane]"}',
        '  ```json\n{"message": "[crane]"}\n```  ',
        'My move: {"message": "[crane]"} good luck',
        "[crane]",
        "```\n[crane]\n```",
    ],
)
def test_single_field_accepts_json_fenced_embedded_and_raw(reply):
    assert parse_action(reply, WORDLE) == {"message": "[crane]"}


def test_raw_text_needs_exactly_one_required_field():
    with pytest.raises(InvalidAction, match="not a JSON object"):
        parse_action("move right two", TWO_FIELDS)


@pytest.mark.parametrize("reply", ["", "   \n\t"])
def test_empty_reply_is_invalid(reply):
    with pytest.raises(InvalidAction, match="empty"):
        parse_action(reply, WORDLE)


def test_wrong_field_names_the_missing_and_the_unexpected_field():
    with pytest.raises(InvalidAction) as info:
        parse_action('{"guess": "crane"}', WORDLE)
    assert "missing required field 'message'" in str(info.value)
    assert "unexpected field 'guess'" in str(info.value)


def test_wrong_type_is_named():
    with pytest.raises(InvalidAction, match="'x' must be of type integer"):
        parse_action('{"x": "one", "y": 2}', TWO_FIELDS)


def test_tool_call_may_omit_type_and_arguments_are_checked():
    call = parse_action('{"tool_name": "add", "arguments": {"n": 2}}', COUNTER)
    assert call == {"type": "call_tool", "tool_name": "add", "arguments": {"n": 2}}
    assert parse_action('{"tool_name": "peek"}', COUNTER)["arguments"] == {}
    with pytest.raises(InvalidAction, match="arguments of 'add'.*'n' must be"):
        parse_action('{"tool_name": "add", "arguments": {"n": "two"}}', COUNTER)


def test_unknown_tool_lists_the_available_ones():
    with pytest.raises(
        InvalidAction, match=r"unknown tool 'sub' \(available: add, peek\)"
    ):
        parse_action('{"tool_name": "sub"}', COUNTER)


def test_example_is_valid_for_its_own_schema():
    assert parse_action(str(WORDLE.example()).replace("'", '"'), WORDLE)
    assert WORDLE.example() == {"message": "..."}
    assert COUNTER.example() == {
        "type": "call_tool",
        "tool_name": "add",
        "arguments": {"n": 0},
    }


@pytest.mark.parametrize("discriminated", [True, False])
def test_a_union_of_list_tools_and_call_tool_actions_is_an_mcp_action(discriminated):
    """Some real envs (agent_world_model_env) publish their action as a union."""
    union = Union[ListToolsAction, CallToolAction]  # noqa: UP007
    kind = Annotated[union, Field(discriminator="type")] if discriminated else union
    schema = TypeAdapter(kind).json_schema()
    assert "title" not in schema and "properties" not in schema
    assert is_mcp_action(schema)
    assert not is_mcp_action(TypeAdapter(Union[int, str]).json_schema())  # noqa: UP007


COLUMN = ActionSpec(
    schema={
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "column": {"type": "integer"},
            "drop": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Count"}},
            "scores": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["column"],
        "$defs": {"Count": {"type": "integer"}},
    }
)


# --- Reasoning is never the action ---------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        '<think>play {"column": 3}? no, 4 is better</think> {"column": 4}',
        '<think>{"column": 3}</think>\n<think>{"column": 2}</think>{"column": 4}',
        # DeepSeek-R1 style: the template put the opening tag in the prompt.
        'I could play {"column": 3}... no.\n</think>\n\n{"column": 4}',
        '<reasoning>{"column": 3}</reasoning>```json\n{"column": 4}\n```',
        '<THINK>{"column": 3}</THINK>{"column": 4}',
        '[THINK]{"column": 3}[/THINK]{"column": 4}',
    ],
)
def test_the_action_inside_reasoning_is_never_played(reply):
    assert parse_action(reply, COLUMN) == {"column": 4}


def test_a_bracketed_word_that_spells_a_reasoning_tag_in_another_case_is_an_action():
    """Magistral's tags are `[THINK]`/`[/THINK]`, exactly; `[think]` is a Wordle
    guess (a 256-episode run met it: seed 85 of the local env was refused three
    times as "ended inside its reasoning")."""
    assert parse_action("[think]", WORDLE) == {"message": "[think]"}
    assert parse_action("[/think] [think]", WORDLE) == {"message": "[/think] [think]"}
    with pytest.raises(InvalidAction, match="ended inside its reasoning"):
        parse_action("[THINK]maybe [crane]", WORDLE)


def test_reasoning_around_a_raw_field_answer_is_dropped():
    reply = "<think>Maybe [slate]? The E is yellow, so [crane].</think>\n[crane]"
    assert parse_action(reply, WORDLE) == {"message": "[crane]"}


@pytest.mark.parametrize(
    "reply",
    [
        '<think>I will play {"column": 3} because',
        '{"column": 2} <think>wait, maybe {"column": 3}',
        "<think>[slate] or [crane]",
    ],
)
def test_a_reply_that_ends_inside_its_reasoning_is_refused(reply):
    spec = WORDLE if "[" in reply and "{" not in reply else COLUMN
    with pytest.raises(InvalidAction, match="ended inside its reasoning"):
        parse_action(reply, spec)


def test_a_reply_cut_off_by_the_server_is_refused_even_when_it_parses():
    with pytest.raises(InvalidAction, match="cut off at the length limit"):
        parse_action('{"column": 4}', COLUMN, finish_reason="length")
    assert parse_action('{"column": 4}', COLUMN, finish_reason="stop") == {"column": 4}


def test_a_reply_of_only_reasoning_says_so():
    with pytest.raises(InvalidAction, match="held only reasoning"):
        parse_action('<think>{"column": 4}</think>  ', COLUMN)


def test_reasoning_tags_are_configurable():
    reply = '<scratch>{"column": 3}</scratch>'
    assert parse_action(reply, COLUMN) == {"column": 3}  # not a tag by default
    tags = (("<scratch>", "</scratch>"),)
    with pytest.raises(InvalidAction, match="held only reasoning"):
        parse_action(reply, COLUMN, delimiters=tags)
    with pytest.raises(InvalidAction, match=r"<scratch> was never closed"):
        parse_action("<scratch>hmm", COLUMN, delimiters=tags)
    # Without any tags, a <think> block is just text.
    assert parse_action("<think>x", WORDLE, delimiters=()) == {"message": "<think>x"}


# --- The final answer wins -----------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        'The format is {"column": 0}. My move:\n```json\n{"column": 4}\n```',
        '```json\n{"column": 1}\n```\nOn second thought:\n```json\n{"column": 4}\n```',
        'Candidates: {"column": 1}, {"column": 2}. Final: {"column": 4}',
        '{"column": 4}\nThat uses {"strategy": "center"} as the plan.',
    ],
)
def test_the_last_object_addressed_to_the_env_is_the_action(reply):
    assert parse_action(reply, COLUMN) == {"column": 4}


def test_an_invalid_final_answer_is_refused_not_replaced_by_an_earlier_one():
    with pytest.raises(InvalidAction, match="'column' must be of type integer"):
        parse_action('{"column": 3} or rather {"column": "left"}', COLUMN)


def test_a_truncated_final_object_is_refused_not_completed():
    with pytest.raises(InvalidAction, match="not closed"):
        parse_action('{"column": 3} then finally {"column": 4, "drop"', COLUMN)
    with pytest.raises(InvalidAction, match="not closed"):
        parse_action('{"message": "[cra', WORDLE)


def test_stray_braces_in_prose_do_not_hide_the_action():
    reply = 'Use {curly} sets like {it\'s fine}. Answer: {"column": 4}'
    assert parse_action(reply, COLUMN) == {"column": 4}


def test_raw_field_takes_the_last_fenced_block_and_ignores_code_objects():
    code = ActionSpec(
        schema={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        }
    )
    reply = "Here is my program:\n```python\nd = {'a': 1}\nprint(d)\n```\nIt prints."
    assert parse_action(reply, code) == {"code": "d = {'a': 1}\nprint(d)"}


# --- Lenient, never wrong ------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ('{"column": "3"}', {"column": 3}),
        ('{"column": 3,}', {"column": 3}),
        ("{'column': 3}", {"column": 3}),
        ("{column: 3, // the middle\n}", {"column": 3}),
        ("{'column': 3, 'drop': True}", {"column": 3, "drop": True}),
        ("{'column': 3, 'drop': None}", {"column": 3, "drop": None}),
        ('{"column": 3.0, "drop": "true"}', {"column": 3, "drop": True}),
        ('{"column": 2, "items": ["1", 2]}', {"column": 2, "items": [1, 2]}),
        ('{"column": 2, "scores": {"a": "1"}}', {"column": 2, "scores": {"a": 1}}),
    ],
)
def test_near_json_the_env_would_accept_is_accepted(reply, action):
    assert parse_action(reply, COLUMN) == action


@pytest.mark.parametrize(
    "reply",
    [
        '{"column": "three"}',
        '{"column": 3.5}',
        '{"column": "inf"}',
        '{"column": 1, "drop": "maybe"}',
    ],
)
def test_values_pydantic_would_refuse_are_refused(reply):
    with pytest.raises(InvalidAction, match="invalid"):
        parse_action(reply, COLUMN)


UNIONS = ActionSpec(
    schema={
        "type": "object",
        "properties": {
            "move": {
                "anyOf": [
                    {"$ref": "#/$defs/Jump"},
                    {
                        "type": "object",
                        "properties": {"steps": {"type": "integer"}},
                        "required": ["steps"],
                    },
                ]
            },
            "level": {"anyOf": [{"enum": ["easy", "hard"]}, {"type": "integer"}]},
            "tries": {"allOf": [{"type": "integer"}, {"minimum": 1}]},
            "pair": {"type": "array", "prefixItems": [{"type": "number"}]},
        },
        "$defs": {
            "Jump": {
                "type": "object",
                "properties": {"height": {"type": "integer"}},
                "required": ["height"],
            },
        },
    }
)


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        # The branch the object fits, through a `$ref` or not, converts its fields.
        ('{"move": {"height": "2"}}', {"move": {"height": 2}}),
        ('{"move": {"steps": "3"}}', {"move": {"steps": 3}}),
        # A branch without a type does not stop a later one converting.
        ('{"level": "3"}', {"level": 3}),
        ('{"level": "easy"}', {"level": "easy"}),
        ('{"tries": "2", "pair": ["0.5"]}', {"tries": 2, "pair": [0.5]}),
    ],
)
def test_values_are_converted_wherever_the_schema_puts_them(reply, action):
    assert parse_action(reply, UNIONS) == action


def test_a_converted_call_leaves_the_callers_arguments_as_they_were():
    arguments = {"n": "2"}
    assert call_to_action("add", arguments, COUNTER)["arguments"] == {"n": 2}
    assert arguments == {"n": "2"}


def test_two_objects_are_never_merged():
    # Neither half is the action alone: refused, not joined into one.
    with pytest.raises(InvalidAction):
        parse_action('{"x": 1}{"y": 2}', TWO_FIELDS)


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 10_000,
        '{"column": ' + "[" * 10_000 + "]" * 10_000 + "}",
        '{"column": 1, "items": ' + "[" * 100 + "]" * 100 + "}",
        "{" * 10_000,
    ],
)
def test_a_deeply_nested_reply_is_an_invalid_action_not_a_crash(reply):
    with pytest.raises(InvalidAction):
        parse_action(reply, COLUMN)


def test_a_remote_ref_in_the_schema_is_never_fetched():
    """A real server on 127.0.0.1 that would answer the `$ref` with a valid schema
    (jsonschema's default registry fetches it, and the reply would then pass)."""
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            body = b'{"type": "integer"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/x.json"
        spec = ActionSpec(
            schema={
                "type": "object",
                "properties": {"x": {"$ref": url}},
                "required": ["x"],
            }
        )
        with pytest.raises(InvalidAction, match="schema cannot be checked.*env"):
            parse_action('{"x": 1}', spec)
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []


# --- Tool calls written as text ------------------------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>\n{"name": "add", "arguments": {"n": 2}}\n</tool_call>',
        '{"name": "add", "arguments": {"n": 2}}',
        '{"name": "add", "parameters": {"n": "2"}}',
        '{"type": "function", "function": {"name": "add", "arguments": "{\\"n\\": 2}"}}',
        '<function=add>{"n": 2}</function>',
        '<think><tool_call>{"name": "peek", "arguments": {}}</tool_call></think>'
        '<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>',
    ],
)
def test_text_tool_calls_are_mcp_actions_in_text_mode(reply):
    assert parse_action(reply, COUNTER) == {
        "type": "call_tool",
        "tool_name": "add",
        "arguments": {"n": 2},
    }


def test_text_tool_call_of_act_is_the_action():
    reply = (
        '<tool_call>{"name": "act", "arguments": {"message": "[crane]"}}</tool_call>'
    )
    assert parse_action(reply, WORDLE) == {"message": "[crane]"}
    assert text_tool_call(reply) == ("act", {"message": "[crane]"})


def test_native_text_fallback_finds_the_last_call_and_drops_reasoning():
    reply = (
        '<think>{"name": "add", "arguments": {"n": 1}}</think>'
        'Calling: <tool_call>{"name": "add", "arguments": {"n": 3}}</tool_call>'
    )
    assert text_tool_call(reply) == ("add", {"n": 3})
    assert text_tool_call("I am not sure what to do.") is None
    assert text_tool_call("") is None
    with pytest.raises(InvalidAction, match="ended inside its reasoning"):
        text_tool_call('<think><tool_call>{"name": "add"')
    with pytest.raises(InvalidAction, match="not closed"):
        text_tool_call('<tool_call>{"name": "add", "arguments": {"n": 3')


def test_structured_call_arguments_are_read_leniently_and_checked():
    assert call_to_action("add", '{"n": "2",}', COUNTER)["arguments"] == {"n": 2}
    with pytest.raises(InvalidAction, match="not valid JSON"):
        call_to_action("add", '{"n": 2', COUNTER)
