"""A schema served by the env, checked before anything uses it (`check_schema`): a
JSON object, at most `MAX_SCHEMA_NESTING` deep, valid JSON Schema 2020-12, every
`$ref` local and resolving. A remote `$ref` is refused as a setup error, never fetched.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from openenv_v1.core.episode.frames import nested_deeper_than
from openenv_v1.core.errors import EnvFailure

MAX_SCHEMA_NESTING = 64
"""The deepest nesting of objects and lists a schema may have (32 levels of
properties); deeper ones are refused before anything recurses through them."""
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
NO_REMOTE: Registry = Registry()
"""A registry of nothing: a validator given it resolves no reference outside the
schema (jsonschema would otherwise retrieve remote ones)."""
# Keywords whose values are instances (data), not schemas: never walked for refs.
_DATA_KEYS = frozenset({"const", "enum", "default", "examples"})


class SchemaProblem(EnvFailure):
    """A schema served by the env cannot be used; `str()` names the fault."""


def check_schema(schema: Any, what: str) -> None:
    """Raise `SchemaProblem` naming the fault when `schema` (described by `what`)
    is not one the episode can use (see the module docstring). Nothing is fetched."""
    if not isinstance(schema, dict):
        raise SchemaProblem(
            f"{what} must be a JSON object, got {type(schema).__name__}"
        )
    if nested_deeper_than(schema, MAX_SCHEMA_NESTING):
        raise SchemaProblem(f"{what} is nested deeper than {MAX_SCHEMA_NESTING} levels")
    refs: list[tuple[str, str]] = []
    for where, node in _schema_nodes(schema):
        for key in _REF_KEYS:
            if isinstance(node.get(key), str):
                refs.append((f"{where}/{key}", node[key]))
        if where and isinstance(node.get("$id"), str):
            raise SchemaProblem(
                f"{what} has an `$id` at {where} (a nested schema resource): "
                "only references into the one document are followed"
            )
    for where, ref in refs:
        if not ref.startswith("#"):
            raise SchemaProblem(
                f"{what} refers to {ref!r} (at {where}): only local references "
                "(#/$defs/...) are followed, and nothing is fetched from elsewhere"
            )
        if resolve_local(schema, ref) is None:
            raise SchemaProblem(
                f"{what} refers to {ref!r} (at {where}), which is not in the schema"
            )
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as e:
        at = "/" + "/".join(str(p) for p in e.absolute_path)
        raise SchemaProblem(
            f"{what} is not a valid JSON schema: {e.message} (at {at})"
        ) from None
    for name, spec in (schema.get("properties") or {}).items():
        if not isinstance(spec, dict):
            raise SchemaProblem(
                f"{what}: the schema of field {name!r} must be an object, not "
                f"{json.dumps(spec)}"
            )


def _schema_nodes(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every object in `schema` with its JSON pointer, instance values
    (`const`, `enum`, `default`, `examples`) left out; walked without recursion."""
    found: list[tuple[str, dict[str, Any]]] = []
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, list):
            stack += [(f"{where}/{i}", item) for i, item in enumerate(node)]
        elif isinstance(node, dict):
            found.append((where, node))
            stack += [
                (f"{where}/{key}", value)
                for key, value in node.items()
                if key not in _DATA_KEYS
            ]
    return found


_SCHEMA_URI = "urn:openenv-v1:schema"


# Validators by schema object: building one costs more than a local step.
_validators: dict[int, tuple[dict[str, Any], Draft202012Validator]] = {}


def validator_for(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator of `schema` that fetches nothing (`NO_REMOTE`), built once per
    schema object (each episode reads its own: the cache is bounded)."""
    cached = _validators.get(id(schema))
    if cached is None or cached[0] is not schema:
        if len(_validators) >= 256:
            _validators.clear()
        validator = Draft202012Validator(schema, registry=NO_REMOTE)
        cached = _validators[id(schema)] = (schema, validator)
    return cached[1]


def resolve_local(schema: dict[str, Any], ref: str) -> Any:
    """What a local `$ref` of `schema` (a JSON pointer, `#/$defs/Move`, or an anchor,
    `#move`) refers to, resolved by `referencing` as the validator resolves it; None
    when it refers to nothing in the schema. Nothing is fetched (`NO_REMOTE`)."""
    resource = Resource.from_contents(schema, default_specification=DRAFT202012)
    resolver = NO_REMOTE.with_resource(_SCHEMA_URI, resource).resolver(_SCHEMA_URI)
    try:
        return resolver.lookup(ref).contents
    except (Unresolvable, AttributeError, TypeError):  # a malformed subschema
        return None
