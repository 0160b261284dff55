"""An action built from its schema, for the format hints the model is shown.

`example_object` builds one the schema accepts (validated before it is returned), or
None when none can be built, so that no hint misleads. `example_objects` puts the
schema's own examples first: a value the env's author wrote is likelier legal.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from openenv_v1.core.episode.schema_check import resolve_local, validator_for

HIDDEN_FIELDS = frozenset({"metadata"})
"""Fields OpenEnv adds to every action: never shown to the model."""


def example_object(schema: dict[str, Any]) -> dict[str, Any] | None:
    """An object `schema` accepts, built from it (its local `$ref`s resolved); None
    when none is built or what was built does not validate."""
    example = _example_object(schema, schema)
    return example if _accepts(schema, example) else None


def example_objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """Objects `schema` accepts, each once: its own `examples`; the built example
    with one field set to a value the schema gives for it (its `examples`, or what
    its description names after "e.g."); the built example itself."""
    built = example_object(schema)
    found: list[Any] = _listed(schema.get("examples"))
    props = schema.get("properties") or {}
    for name, spec in props.items():
        if name in HIDDEN_FIELDS or not isinstance(spec, dict):
            continue
        found += [{**(built or {}), name: value} for value in _field_examples(spec)]
    found.append(built)
    kept: list[dict[str, Any]] = []
    for example in found:
        if isinstance(example, dict) and example not in kept:
            if _accepts(schema, example):
                kept.append(example)
    return kept


# "e.g. [crane]", "for example `e2e4`": a quoted or bracketed value, else one word.
_NAMED_EXAMPLE = re.compile(
    r"\b(?:e\.g\.|for example|for instance)[,:]?\s+"
    r"(?:`(?P<tick>[^`]+)`|\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'"
    r"|(?P<bracketed>\[[^\]]*\]|\{[^}]*\})|(?P<word>[^\s,;)]+))",
    re.IGNORECASE,
)


def _field_examples(spec: dict[str, Any]) -> list[Any]:
    """The values a field's schema gives as examples: its `examples`, then those its
    description names, as written and JSON-decoded (the schema keeps what it accepts)."""
    values = _listed(spec.get("examples"))
    for found in _NAMED_EXAMPLE.finditer(str(spec.get("description") or "")):
        text = next(v for v in found.groupdict().values() if v is not None)
        if found["word"] is not None:
            text = text.rstrip(".:")
        values.append(text)
        try:
            values.append(json.loads(text))
        except ValueError:
            pass
    return values


def _listed(examples: Any) -> list[Any]:
    return list(examples) if isinstance(examples, list) else []


class _NoExample(Exception):
    """The schema asks for something no example is built for."""


_MAX_DEPTH = 8
_MAX_ITEMS = 64


_NONE = object()  # `_example_object`'s answer when a field has no example


def _accepts(schema: dict[str, Any], example: Any) -> bool:
    if example is _NONE:
        return False
    try:
        return validator_for(schema).is_valid(example)
    except Exception:  # an invalid schema or a $ref the validator cannot resolve
        return False


def _example_object(
    schema: dict[str, Any], root: dict[str, Any], depth: int = 0
) -> dict[str, Any] | Any:
    """The object's required fields (all of them when it names none), each with an
    example value; `_NONE` when one of them has none."""
    props = schema.get("properties") or {}
    required = schema.get("required") or list(props)
    try:
        return {
            name: _example_value(props[name], root, depth + 1)
            for name in required
            if name in props and name not in HIDDEN_FIELDS
        }
    except _NoExample:
        return _NONE


def _example_value(spec: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Any:
    """A value `spec` accepts; raises `_NoExample` when none is built."""
    if depth > _MAX_DEPTH or not isinstance(spec, dict):
        raise _NoExample
    ref = spec.get("$ref")
    if isinstance(ref, str):
        target = resolve_local(root, ref)
        spec = {
            **(target if isinstance(target, dict) else {}),
            **{k: v for k, v in spec.items() if k != "$ref"},
        }
    if "const" in spec:
        return spec["const"]
    if spec.get("enum"):
        return spec["enum"][0]
    if "default" in spec and spec["default"] is not None:
        return spec["default"]
    for option in spec.get("anyOf") or spec.get("oneOf") or ():
        if isinstance(option, dict) and option.get("type") != "null":
            return _example_value(option, root, depth + 1)
    if spec.get("allOf"):
        merged: dict[str, Any] = {}
        for part in spec["allOf"]:
            merged.update(part if isinstance(part, dict) else {})
        return _example_value(merged, root, depth + 1)
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object":
        value = _example_object(spec, root, depth)
        if value is _NONE:
            raise _NoExample
        return value
    if kind == "array":
        return _example_array(spec, root, depth)
    if kind in ("integer", "number"):
        return _example_number(spec, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind in ("string", None):
        return _example_string(spec)
    raise _NoExample


def _example_array(spec: dict[str, Any], root: dict[str, Any], depth: int) -> list[Any]:
    prefix = spec.get("prefixItems") or []
    length = max(int(spec.get("minItems") or 0), len(prefix))
    if "maxItems" in spec and length > int(spec["maxItems"]) or length > _MAX_ITEMS:
        raise _NoExample
    values = [_example_value(p, root, depth + 1) for p in prefix[:length]]
    items = spec.get("items")
    if len(values) < length:
        if items is False:
            raise _NoExample
        item = items if isinstance(items, dict) else {}
        values += [_example_value(item, root, depth + 1)] * (length - len(values))
    return values


def _example_number(spec: dict[str, Any], integer: bool) -> int | float:
    step = 1 if integer else 0.5
    low = spec.get("minimum")
    if spec.get("exclusiveMinimum") is not None:
        low = max(
            low if low is not None else -math.inf, spec["exclusiveMinimum"] + step
        )
    high = spec.get("maximum")
    if spec.get("exclusiveMaximum") is not None:
        high = min(
            high if high is not None else math.inf, spec["exclusiveMaximum"] - step
        )
    value: float = 0
    if low is not None and value < low:
        value = math.ceil(low) if integer else low
    if high is not None and value > high:
        value = math.floor(high) if integer else high
    multiple = spec.get("multipleOf")
    if multiple:
        value = math.ceil(value / multiple) * multiple
    return int(value) if integer else float(value)


def _example_string(spec: dict[str, Any]) -> str:
    """A placeholder of an allowed length (a `pattern` it misses fails `_accepts`)."""
    low = int(spec.get("minLength") or 0)
    high = spec.get("maxLength")
    text = "..." if low <= 3 else "x" * low
    return text[: int(high)] if high is not None else text
