"""A served schema is checked before use, its references resolved as the validator
resolves them (`core/episode/schema_check.py`). In process; the hostile server's
schema faults (`tests/test_hostile.py`) are the same checks over HTTP."""

import pytest

from openenv_v1.core.episode.schema import ActionSpec, is_mcp_action
from openenv_v1.core.episode.schema_check import (
    SchemaProblem,
    check_schema,
    resolve_local,
)

MOVE = {
    "type": "object",
    "definitions": {"Cell": {"type": "integer", "minimum": 2}},
    "$defs": {"Name": {"$anchor": "name", "type": "string", "minLength": 4}},
    "properties": {
        "cell": {"$ref": "#/definitions/Cell"},
        "name": {"$ref": "#name"},
    },
    "required": ["cell", "name"],
}


def test_pointers_and_anchors_resolve_and_feed_the_example():
    check_schema(MOVE, "the action schema")
    assert resolve_local(MOVE, "#name") == MOVE["$defs"]["Name"]
    assert resolve_local(MOVE, "#/definitions/Cell") == {
        "type": "integer",
        "minimum": 2,
    }
    assert ActionSpec(schema=MOVE).example() == {"cell": 2, "name": "xxxx"}


@pytest.mark.parametrize("ref", ["#/definitions/Missing", "#nowhere"])
def test_a_reference_to_nothing_is_refused_naming_it(ref):
    schema = {**MOVE, "properties": {"cell": {"$ref": ref}}}
    assert resolve_local(schema, ref) is None
    with pytest.raises(SchemaProblem) as caught:
        check_schema(schema, "the action schema")
    assert str(caught.value) == (
        f"the action schema refers to {ref!r} (at /properties/cell/$ref), which is "
        "not in the schema"
    )


def test_a_union_with_a_referenced_call_tool_branch_is_an_mcp_action():
    schema = {
        "anyOf": [{"$ref": "#/$defs/List"}, {"$ref": "#/$defs/Call"}],
        "$defs": {
            "List": {"title": "ListToolsAction"},
            "Call": {"title": "CallToolAction"},
        },
    }
    assert is_mcp_action(schema)
    assert not is_mcp_action({**schema, "anyOf": [{"$ref": "#/$defs/List"}]})
