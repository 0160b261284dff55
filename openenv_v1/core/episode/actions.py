"""Turn a model reply into an action, or say precisely why it is not one.

The one place a reply becomes an action (`replies.py` reads the text); the rule is
docs/replies.md's: reasoning dropped, then the LAST JSON object addressed to this env
is the action, checked, and never an earlier one instead; with none, a schema whose
only required field takes a string (`raw_field`) gets the answer itself. Checking
validates against the live schema (and a tool's input schema), remote `$ref`s refused
(`schema_check.NO_REMOTE`); a scalar of the wrong type is first converted as the
env's pydantic model would in lax mode (`"3"` for an integer).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from jsonschema.exceptions import SchemaError, ValidationError
from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError
from referencing.exceptions import Unresolvable

from openenv_v1.core.episode.replies import (
    REASONING_DELIMITERS,
    UNCLOSED_OBJECT,
    Found,
    InvalidAction,
    as_call,
    decode,
    final_answer,
    find_objects,
    unfenced,
    whole_object,
)
from openenv_v1.core.episode.schema import ACT_TOOL, ActionSpec
from openenv_v1.core.episode.schema_check import validator_for

Delimiters = tuple[tuple[str, str], ...]


def parse_action(
    reply: str,
    spec: ActionSpec,
    *,
    finish_reason: str | None = None,
    delimiters: Delimiters = REASONING_DELIMITERS,
) -> dict[str, Any]:
    """The action a reply written as text stands for (see the module docstring)."""
    answer = final_answer(reply, delimiters, finish_reason)
    try:
        return _action(answer, spec)
    except RecursionError:
        raise InvalidAction("the reply is nested too deeply to read") from None


def text_tool_call(
    reply: str,
    *,
    finish_reason: str | None = None,
    delimiters: Delimiters = REASONING_DELIMITERS,
) -> tuple[str, Any] | None:
    """Native tool calling, a reply with no structured call: the last tool call
    written in its text (name, arguments), or None when it writes none. (The call is
    checked by `call_to_action`, as a structured one is.)"""
    if not reply.strip():
        return None
    answer = final_answer(reply, delimiters, finish_reason)
    try:
        objects = find_objects(answer)
    except RecursionError:
        raise InvalidAction("the reply is nested too deeply to read") from None
    calls = [f for f in objects.found if f.call is not None]
    if objects.unclosed_after(calls[-1].end if calls else 0):
        raise InvalidAction(UNCLOSED_OBJECT)
    return calls[-1].call if calls else None


def call_to_action(name: str, arguments: Any, spec: ActionSpec) -> dict[str, Any]:
    """A native tool call (tool name, its arguments parsed or as the JSON text the
    model wrote) as an action."""
    if isinstance(arguments, str):
        if arguments.strip():
            parsed = decode(arguments)
            if parsed is None:
                try:
                    json.loads(arguments)
                except (ValueError, RecursionError) as e:
                    raise InvalidAction(
                        f"the arguments are not valid JSON ({_short(e)})"
                    ) from None
            arguments = parsed
        else:
            arguments = {}
    if not isinstance(arguments, dict):
        raise InvalidAction(
            f"the arguments must be a JSON object, not {type(arguments).__name__}"
        )
    if spec.is_mcp:
        return _as_tool_call({"tool_name": name, "arguments": arguments}, spec)
    if name != ACT_TOOL:
        raise InvalidAction(f"unknown tool {name!r} (available: {ACT_TOOL})")
    return _checked(arguments, spec.schema, "action")


def _short(error: BaseException) -> str:
    return str(error)[:200] or type(error).__name__


def _action(answer: str, spec: ActionSpec) -> dict[str, Any]:
    objects = find_objects(answer)
    addressed = [(f, a) for f in objects.found if (a := _addressed(f, spec))]
    if objects.unclosed_after(addressed[-1][0].end if addressed else 0):
        raise InvalidAction(UNCLOSED_OBJECT)
    if addressed:
        return _checked_action(addressed[-1][1], spec)
    if spec.raw_field is not None:
        whole = whole_object(answer, objects)
        if whole is None:
            return _checked({spec.raw_field: unfenced(answer)}, spec.schema, "action")
        return _checked_action(whole.value, spec)
    if objects.found:
        return _checked_action(objects.found[-1].value, spec)
    raise InvalidAction("the reply is not a JSON object")


def _addressed(found: Found, spec: ActionSpec) -> dict[str, Any] | None:
    """The action an object of the reply stands for, when it is addressed to this
    env (rule 2), else None."""
    value = found.value
    if spec.is_mcp:
        if "tool_name" in value:
            return value  # the call-tool form: checked whole, extra keys included
        if found.call is None:
            return None
        name, arguments = found.call
        return {"tool_name": name, "arguments": arguments}
    if value.keys() & spec.fields.keys():
        return value
    call = found.call or as_call(value)
    if call is not None and call[0] == ACT_TOOL:
        return call[1] if isinstance(call[1], dict) else {}
    return None


def _checked_action(candidate: dict[str, Any], spec: ActionSpec) -> dict[str, Any]:
    if spec.is_mcp:
        return _as_tool_call(candidate, spec)
    return _checked(candidate, spec.schema, "action")


def _as_tool_call(candidate: dict[str, Any], spec: ActionSpec) -> dict[str, Any]:
    call = _checked({"type": "call_tool", **candidate}, spec.schema, "tool call")
    tool = spec.tool(call["tool_name"])
    if tool is None:
        names = ", ".join(t.name for t in spec.tools or ()) or "none"
        raise InvalidAction(f"unknown tool {call['tool_name']!r} (available: {names})")
    call.setdefault("arguments", {})
    if tool.input_schema:
        call["arguments"] = _checked(
            call["arguments"], tool.input_schema, f"arguments of {tool.name!r}"
        )
    return call


def _checked(instance: Any, schema: dict[str, Any], what: str) -> Any:
    """The instance, lax-coerced where the schema check finds a scalar of the wrong
    type (`_coerced`), when it is valid; else `InvalidAction` naming every problem."""
    validator = validator_for(schema)
    try:
        if validator.is_valid(instance):
            return instance
        instance = _coerced(instance, validator.iter_errors(instance))
        problems = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    except (Unresolvable, SchemaError, RecursionError, re.error) as e:
        raise InvalidAction(
            f"the env's {what} schema cannot be checked ({_short(e)}); this is a "
            "fault of the env server, not of the reply"
        ) from None
    if not problems:
        return instance
    raise InvalidAction(
        f"the {what} is invalid: " + "; ".join(_explain(p) for p in problems)
    )


_LAX: dict[str, TypeAdapter[Any]] = {
    "integer": TypeAdapter(int),
    "number": TypeAdapter(float),
    "boolean": TypeAdapter(bool),
}


def _coerced(instance: Any, errors: Iterable[ValidationError]) -> Any:
    """`instance` with each scalar the validator found of the wrong type converted
    the way pydantic's lax mode would (`"3"` -> 3, `"true"` -> True), where that
    succeeds and gives a finite number; everything else is left as it is for the
    check to judge. The validator does the walk (`properties`, `items`, `$ref`s,
    ...); a changed value is a copy, the caller's instance is never modified."""
    for path, value in _conversions(errors):
        instance = _replaced(instance, list(path), value)
    return instance


def _conversions(
    errors: Iterable[ValidationError],
) -> Iterator[tuple[Sequence[Any], Any]]:
    """(where, converted value) for each `type` error that converts. A union
    (`anyOf` / `oneOf`) is converted within one branch: the first that converts,
    those whose own type the value has first (pydantic's smart mode prefers exact
    matches)."""
    for error in errors:
        if error.validator == "type":
            kinds = error.validator_value
            for kind in [kinds] if isinstance(kinds, str) else kinds:
                converted = _lax(error.instance, kind)
                if converted is not _FAILED:
                    yield error.absolute_path, converted
                    break
        elif error.validator in ("anyOf", "oneOf"):
            branches: dict[Any, list[ValidationError]] = {}
            for sub in error.context or ():
                branches.setdefault(sub.relative_schema_path[0], []).append(sub)
            for branch in sorted(branches.values(), key=_lacks_own_type):
                if found := list(_conversions(branch)):
                    yield from found
                    break


def _lacks_own_type(errors: list[ValidationError]) -> bool:
    """Whether a union branch's errors say the value itself is not of its type."""
    return any(e.validator == "type" and not e.relative_path for e in errors)


def _replaced(value: Any, path: list[Any], new: Any) -> Any:
    """`value` with the item at `path` replaced by `new`, the containers on the way
    copied."""
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


_FAILED = object()


def _lax(value: Any, kind: str) -> Any:
    adapter = _LAX.get(kind)
    if adapter is None or isinstance(value, (dict, list)) or value is None:
        return _FAILED
    try:
        converted = adapter.validate_python(value)
    except PydanticError:
        return _FAILED
    if isinstance(converted, float) and not math.isfinite(converted):
        return _FAILED
    return converted


def _explain(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        return f"missing required field {missing!r}" + (f" in {where}" if where else "")
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return (
            "unexpected field"
            + ("s " if len(extra) > 1 else " ")
            + ", ".join(repr(e) for e in extra)
        )
    if error.validator == "type":
        return f"field {where!r} must be of type {error.validator_value}, got {type(error.instance).__name__}"
    return f"{where or 'value'}: {error.message[:300]}"


__all__ = [
    "InvalidAction",
    "call_to_action",
    "parse_action",
    "text_tool_call",
]
