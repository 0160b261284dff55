"""Turning model replies into actions: accepted forms and precise refusals."""

from typing import Annotated, Union

import pytest
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from pydantic import Field, TypeAdapter

from openenv_v1.core.actions import InvalidAction, parse_action
from openenv_v1.core.schema import CALL_TOOL_SCHEMA, ActionSpec, Tool, is_mcp_action

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
        parse_action('{"tool_name": "add", "arguments": {"n": "2"}}', COUNTER)


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
