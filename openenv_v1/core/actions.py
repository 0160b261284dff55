"""Turn a model reply into an action, or say precisely why it is not one.

Accepted forms, in order: a JSON object (the whole reply, or the first ```json fenced
block, or the first {...} object in the text); for a schema whose only required field
takes a string, the bare reply as that field. MCP envs take call-tool objects; `type`
may be left out. The action is then checked against the live JSON schema (and, for a
tool call, the tool's input schema) before anything is sent to the env.

With native tool calling the model's call arrives structured (`call_to_action`): an
MCP env's tool call becomes a call-tool action, a call of `act` is the action itself,
and both are checked the same way.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema import Draft202012Validator

from openenv_v1.core.schema import ACT_TOOL, ActionSpec

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)


class InvalidAction(ValueError):
    """The reply is not a valid action; `str()` says what to fix."""


def parse_action(reply: str, spec: ActionSpec) -> dict[str, Any]:
    text = reply.strip()
    if not text:
        raise InvalidAction("the reply was empty")
    candidate = _json_object(text)
    if candidate is None:
        if spec.raw_field is None:
            raise InvalidAction("the reply is not a JSON object")
        candidate = {spec.raw_field: _unfence(text)}
    if spec.is_mcp:
        candidate = _as_tool_call(candidate, spec)
    else:
        _check(candidate, spec.schema, "action")
    return candidate


def call_to_action(name: str, arguments: Any, spec: ActionSpec) -> dict[str, Any]:
    """A native tool call (tool name, its arguments parsed or as the JSON text the
    model wrote) as an action."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as e:
            raise InvalidAction(f"the arguments are not valid JSON ({e})") from None
    if not isinstance(arguments, dict):
        raise InvalidAction(
            f"the arguments must be a JSON object, not {type(arguments).__name__}"
        )
    if spec.is_mcp:
        return _as_tool_call({"tool_name": name, "arguments": arguments}, spec)
    if name != ACT_TOOL:
        raise InvalidAction(f"unknown tool {name!r} (available: {ACT_TOOL})")
    _check(arguments, spec.schema, "action")
    return dict(arguments)


def _unfence(text: str) -> str:
    match = _FENCE.fullmatch(text)
    return match.group(1).strip() if match else text


def _json_object(text: str) -> dict[str, Any] | None:
    if "{" not in text:  # no object anywhere, fenced or not
        return None
    bodies = [text, *(m.group(1).strip() for m in _FENCE.finditer(text))]
    for body in bodies:
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    start = text.find("{")
    if start >= 0:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            return None
        if isinstance(value, dict):
            return value
    return None


def _as_tool_call(candidate: dict[str, Any], spec: ActionSpec) -> dict[str, Any]:
    call = {"type": "call_tool", **candidate}
    _check(call, spec.schema, "tool call")
    tool = spec.tool(call["tool_name"])
    if tool is None:
        names = ", ".join(t.name for t in spec.tools or ()) or "none"
        raise InvalidAction(f"unknown tool {call['tool_name']!r} (available: {names})")
    call.setdefault("arguments", {})
    if tool.input_schema:
        _check(call["arguments"], tool.input_schema, f"arguments of {tool.name!r}")
    return call


# Validators by schema object: building one costs more than a local step.
_validators: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def _validator(schema: dict[str, Any]) -> Draft202012Validator:
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:
        cached = _validators[id(schema)] = (schema, Draft202012Validator(schema))
    return cached[1]


def _check(instance: Any, schema: dict[str, Any], what: str) -> None:
    validator = _validator(schema)
    if validator.is_valid(instance):
        return
    problems = sorted(validator.iter_errors(instance), key=lambda e: list(e.path))
    if problems:
        raise InvalidAction(
            f"the {what} is invalid: " + "; ".join(_explain(p) for p in problems)
        )


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
    return f"{where or 'value'}: {error.message}"
