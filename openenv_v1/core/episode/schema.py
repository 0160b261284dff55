"""The live action contract of a server: its action schema and, for MCP envs, its tools.

`/schema` gives the action's JSON schema. The server is untrusted, so what it serves is
read under one total deadline and at most `MAX_SCHEMA_BYTES`, and every schema (the
action's, each MCP tool's input) is checked before use (`check_schema`): a JSON
object, at most `MAX_SCHEMA_NESTING` levels deep, valid against JSON Schema 2020-12
(a `pattern` must be a valid regex), every `$ref` local (`#/$defs/...`,
`#/definitions/...`, an `$anchor`) and resolving. A remote `$ref` is never fetched:
the schema is refused, as a setup error naming the reference. A self-referencing
schema is fine (its example stops where it recurses). An MCP env (its action is OpenEnv's generic
`Action`, `CallToolAction` or `ListToolsAction`, or any action with a `type` of
`call_tool`) is driven through `call_tool` actions instead, so its tools are discovered:
first with a `list_tools` step, and when that fails (servers whose action class
subclasses `CallToolAction` reject it) with JSON-RPC `tools/list` on `/mcp`. (For an
env on openenv-core 0.2.2 the client sends that step as JSON-RPC: see `mcp_route`.)

The reset contract is not on the wire: OpenEnv's server filters reset kwargs by the
env's `reset` signature and drops the rest silently, but no endpoint (`/schema`,
`/metadata`, `/openapi.json`) publishes that signature and nothing echoes the kwargs.
`read_reset_params` therefore reads it from the env's source when that is local.
"""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import functools
import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from websockets.exceptions import ConnectionClosed

from openenv_v1.core.episode.mcp_route import DEADLOCK_HINT
from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.http_client import async_client

MCP_ACTION_TITLES = frozenset({"Action", "CallToolAction", "ListToolsAction"})

CALL_TOOL_SCHEMA: dict[str, Any] = {
    "title": "CallToolAction",
    "type": "object",
    "properties": {
        "type": {"const": "call_tool"},
        "tool_name": {"type": "string"},
        "arguments": {"type": "object"},
    },
    "required": ["tool_name"],
    "additionalProperties": False,
}

# OpenEnv adds `metadata` to every action; it is never the model's business.
_HIDDEN_FIELDS = frozenset({"metadata"})

MAX_SCHEMA_BYTES = 4 * 1024 * 1024
"""The largest `/schema` (or JSON-RPC `tools/list`) body read from a server."""
MAX_SCHEMA_NESTING = 64
"""The deepest nesting of objects and lists a schema may have (32 levels of
properties); deeper ones are refused before anything recurses through them."""
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_NO_REMOTE: Registry = Registry()
"""A registry of nothing: a validator given it resolves no reference outside the
schema (jsonschema would otherwise retrieve remote ones)."""
# Keywords whose values are instances (data), not schemas: never walked for refs.
_DATA_KEYS = frozenset({"const", "enum", "default", "examples"})

ACT_TOOL = "act"
"""The one tool of a non-MCP env in native tool calling: its arguments are the action."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Tool:
        schema = raw.get("input_schema") or raw.get("inputSchema") or {}
        return cls(str(raw["name"]), str(raw.get("description") or ""), dict(schema))


@dataclass(frozen=True)
class ActionSpec:
    """What the model must send: `schema` for plain envs; for MCP envs the call-tool
    format in `schema` plus the discovered `tools`."""

    schema: dict[str, Any]
    tools: tuple[Tool, ...] | None = None

    @property
    def is_mcp(self) -> bool:
        return self.tools is not None

    @functools.cached_property
    def fields(self) -> dict[str, Any]:
        props = self.schema.get("properties") or {}
        return {k: v for k, v in props.items() if k not in _HIDDEN_FIELDS}

    @functools.cached_property
    def required(self) -> list[str]:
        return [f for f in self.schema.get("required") or [] if f not in _HIDDEN_FIELDS]

    @functools.cached_property
    def raw_field(self) -> str | None:
        """The field a bare (non-JSON) reply fills: the only required one, when there is
        exactly one and it takes a string."""
        if self.is_mcp or len(self.required) != 1:
            return None
        name = self.required[0]
        spec = self.fields.get(name, {})
        return name if spec.get("type", "string") == "string" else None

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools or () if t.name == name), None)

    def model_tools(self) -> tuple[Tool, ...]:
        """The action contract as the model's own tools (native tool calling): an MCP
        env's tools as they are; for any other env one tool, `act`, whose parameters
        are the action's schema (less `metadata`) and whose description is the
        action's docstring."""
        if self.is_mcp:
            return tuple(
                Tool(t.name, t.description, t.input_schema or _EMPTY_OBJECT)
                for t in self.tools or ()
            )
        parameters = {
            k: v
            for k, v in self.schema.items()
            if k not in ("title", "description", "properties", "required")
        }
        parameters["properties"] = self.fields
        if self.required:
            parameters["required"] = self.required
        title = self.schema.get("title") or "action"
        description = self.schema.get("description") or (
            f"Take one step in the environment with one {title}."
        )
        return (Tool(ACT_TOOL, description, parameters),)

    def example(self) -> dict[str, Any] | None:
        """An action built from the schema, for format hints: one that the schema
        accepts (lengths, item types, enums, bounds, `const`), or None when none can be
        built (a `pattern`, a `not`, a schema too deep), so that no hint misleads."""
        if self.is_mcp:
            tool = self.tools[0] if self.tools else None
            args = (
                _example_object(tool.input_schema, tool.input_schema.get("$defs") or {})
                if tool
                else {}
            )
            if tool is not None and not _accepts(tool.input_schema, args):
                return None
            return {
                "type": "call_tool",
                "tool_name": tool.name if tool else "<tool>",
                "arguments": args,
            }
        example = _example_object(self.schema, self.schema.get("$defs") or {})
        return example if _accepts(self.schema, example) else None


_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


class _NoExample(Exception):
    """The schema asks for something no example is built for."""


_MAX_DEPTH = 8
_MAX_ITEMS = 64


_NONE = object()
"""`_example_object`'s answer when a field has no example."""


def _accepts(schema: dict[str, Any], example: Any) -> bool:
    if example is _NONE:
        return False
    try:
        return Draft202012Validator(schema, registry=_NO_REMOTE).is_valid(example)
    except Exception:  # an invalid schema or a $ref the validator cannot resolve
        return False


def _example_object(
    schema: dict[str, Any], defs: dict[str, Any], depth: int = 0
) -> dict[str, Any] | Any:
    """The object's required fields (all of them when it names none), each with an
    example value; `_NONE` when one of them has none."""
    props = schema.get("properties") or {}
    required = schema.get("required") or list(props)
    try:
        return {
            name: _example_value(props[name], defs, depth + 1)
            for name in required
            if name in props and name not in _HIDDEN_FIELDS
        }
    except _NoExample:
        return _NONE


def _example_value(spec: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> Any:
    """A value `spec` accepts; raises `_NoExample` when none is built."""
    if depth > _MAX_DEPTH or not isinstance(spec, dict):
        raise _NoExample
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        spec = {
            **defs.get(ref.rsplit("/", 1)[-1], {}),
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
            return _example_value(option, defs, depth + 1)
    if spec.get("allOf"):
        merged: dict[str, Any] = {}
        for part in spec["allOf"]:
            merged.update(part if isinstance(part, dict) else {})
        return _example_value(merged, defs, depth + 1)
    kind = spec.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "object":
        value = _example_object(spec, defs, depth)
        if value is _NONE:
            raise _NoExample
        return value
    if kind == "array":
        return _example_array(spec, defs, depth)
    if kind in ("integer", "number"):
        return _example_number(spec, kind == "integer")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    if kind in ("string", None):
        return _example_string(spec)
    raise _NoExample


def _example_array(spec: dict[str, Any], defs: dict[str, Any], depth: int) -> list[Any]:
    prefix = spec.get("prefixItems") or []
    length = max(int(spec.get("minItems") or 0), len(prefix))
    if "maxItems" in spec and length > int(spec["maxItems"]) or length > _MAX_ITEMS:
        raise _NoExample
    values = [_example_value(p, defs, depth + 1) for p in prefix[:length]]
    items = spec.get("items")
    if len(values) < length:
        if items is False:
            raise _NoExample
        item = items if isinstance(items, dict) else {}
        values += [_example_value(item, defs, depth + 1)] * (length - len(values))
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


def is_mcp_action(schema: dict[str, Any]) -> bool:
    """Whether the action schema is OpenEnv's MCP call-tool action: by title, a `type`
    of `call_tool`, or a union (`oneOf` / `anyOf`, e.g. of `ListToolsAction` and
    `CallToolAction`) with a `call_tool` branch."""
    if schema.get("title") in MCP_ACTION_TITLES:
        return True
    mapping = (schema.get("discriminator") or {}).get("mapping") or {}
    if "call_tool" in mapping:
        return True
    defs = schema.get("$defs") or {}
    for branch in schema.get("oneOf") or schema.get("anyOf") or ():
        ref = branch.get("$ref") if isinstance(branch, dict) else None
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            branch = defs.get(ref.rsplit("/", 1)[-1], {})
        if isinstance(branch, dict) and branch.get("title") == "CallToolAction":
            return True
    type_spec = (schema.get("properties") or {}).get("type") or {}
    return "call_tool" in (type_spec.get("const"), type_spec.get("default")) or (
        "call_tool" in (type_spec.get("enum") or ())
    )


async def fetch_action_spec(
    client: Any, base_url: str, timeout_s: float = 10.0
) -> ActionSpec:
    """Read the server's action contract (see the module docstring). Each request,
    the `list_tools` step included, gets `timeout_s`."""
    async with async_client(timeout_s) as http:
        try:
            body = await _read_json(http, "GET", f"{base_url}/schema", timeout_s)
            action = body["action"]
        except Exception as e:
            raise EnvFailure(
                f"cannot read the action schema from {base_url}/schema: {describe(e)}"
            ) from e
        check_schema(action, f"the action schema at {base_url}/schema")
        if not is_mcp_action(action):
            return ActionSpec(schema=action)
        tools = await _list_tools(client, http, base_url, timeout_s)
    for tool in tools:
        check_schema(
            tool.input_schema, f"the input schema of tool {tool.name!r} at {base_url}"
        )
    return ActionSpec(schema=CALL_TOOL_SCHEMA, tools=tuple(tools))


async def _read_json(
    http: httpx.AsyncClient, method: str, url: str, timeout_s: float, **kwargs: Any
) -> Any:
    """The JSON body of one request, all of it read within `timeout_s` (the
    client's own timeout bounds each read only: a server dripping a byte at a time
    would never trip it) and at most `MAX_SCHEMA_BYTES`."""
    try:
        async with asyncio.timeout(timeout_s):
            async with http.stream(method, url, **kwargs) as response:
                response.raise_for_status()
                body = bytearray()
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_SCHEMA_BYTES:
                        raise ValueError(f"the body is over {MAX_SCHEMA_BYTES:,} bytes")
    except TimeoutError:
        raise TimeoutError(f"no complete answer within {timeout_s:g}s") from None
    return json.loads(body)


class SchemaProblem(EnvFailure):
    """A schema served by the env cannot be used; `str()` names the fault."""


def check_schema(schema: Any, what: str) -> None:
    """Raise `SchemaProblem` naming the fault when `schema` (described by `what`)
    is not one the episode can use (see the module docstring). Nothing is fetched."""
    from openenv_v1.core.episode.frames import (
        nested_deeper_than,  # frames imports render
    )

    if not isinstance(schema, dict):
        raise SchemaProblem(
            f"{what} must be a JSON object, got {type(schema).__name__}"
        )
    if nested_deeper_than(schema, MAX_SCHEMA_NESTING):
        raise SchemaProblem(f"{what} is nested deeper than {MAX_SCHEMA_NESTING} levels")
    anchors: set[str] = set()
    refs: list[tuple[str, str]] = []
    for where, node in _schema_nodes(schema):
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                anchors.add(node[key])
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
        if not _resolves(schema, ref[1:], anchors):
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


def _resolves(schema: dict[str, Any], fragment: str, anchors: set[str]) -> bool:
    """Whether the fragment of a local `$ref` (the part after `#`) names a part of
    `schema`: a JSON pointer (`/$defs/Move`) or an anchor name."""
    fragment = unquote(fragment)
    if fragment and not fragment.startswith("/"):
        return fragment in anchors
    node: Any = schema
    for part in fragment.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


async def _list_tools(
    client: Any, http: httpx.AsyncClient, base_url: str, timeout_s: float
) -> list[Tool]:
    try:
        result = await asyncio.wait_for(client.step({"type": "list_tools"}), timeout_s)
        raw = result.observation.get("tools")
        if isinstance(raw, list):
            return [Tool.from_wire(t) for t in raw]
    except (TimeoutError, ConnectionClosed) as e:
        # A server that takes the step but never answers will not answer the
        # JSON-RPC fallback either, and the session is now unusable. One whose
        # event loop is blocked stops answering pings too: the client then closes
        # the connection (`keepalive ping timeout`) before the timeout is up.
        what = (
            f"did not answer within {timeout_s:.0f}s"
            if isinstance(e, TimeoutError)
            else f"got no answer before the connection closed ({describe(e)})"
        )
        raise EnvFailure(
            f"MCP env at {base_url}: the list_tools step {what} ({DEADLOCK_HINT})"
        ) from e
    except Exception:
        pass  # subclassed call-tool actions reject list_tools; JSON-RPC still works
    try:
        body = await _read_json(
            http,
            "POST",
            f"{base_url}/mcp",
            timeout_s,
            json={"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1},
        )
        if body.get("error"):
            raise RuntimeError(body["error"].get("message") or body["error"])
        return [Tool.from_wire(t) for t in body["result"]["tools"]]
    except Exception as e:
        raise EnvFailure(
            f"MCP env at {base_url}: tools could not be listed with a list_tools step "
            f"nor with JSON-RPC tools/list on /mcp: {describe(e)}"
        ) from e


async def relist_tools(
    client: Any, base_url: str, spec: ActionSpec, timeout_s: float = 10.0
) -> ActionSpec:
    """`spec` with an MCP env's tools listed again (after a reset: an env may start
    its tool server there), the same way `fetch_action_spec` lists them."""
    async with async_client(timeout_s) as http:
        tools = await _list_tools(client, http, base_url, timeout_s)
    return dataclasses.replace(spec, tools=tuple(tools))


def tools_in(observation: dict[str, Any]) -> tuple[Tool, ...] | None:
    """The tools a step's observation reports (a `tools` list of named tools, as a
    `list_tools` step answers), or None when it reports none."""
    raw = observation.get("tools") if isinstance(observation, dict) else None
    if not isinstance(raw, list) or not raw:
        return None
    if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in raw):
        return None
    return tuple(Tool.from_wire(t) for t in raw)


# OpenEnv's env base classes: the server inspects `reset` (or `reset_async`, when
# overridden) of the env class built on them (`HTTPEnvServer._get_valid_kwargs`).
_ENV_BASES = frozenset({"Environment", "MCPEnvironment"})
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
_MAX_SOURCE_FILES = 500


@dataclass(frozen=True)
class ResetParams:
    """The keyword arguments an env's `reset` takes, as read from its source."""

    names: frozenset[str]
    any_keyword: bool
    """`reset` takes `**kwargs`: every key reaches the env."""
    where: str
    """The method(s) read, for messages: `WordleEnvironment.reset in server/env.py`."""

    def unknown(self, kwargs: dict[str, Any]) -> list[str]:
        """Keys of `kwargs` the server drops before calling `reset`."""
        return [] if self.any_keyword else [k for k in kwargs if k not in self.names]


def read_reset_params(source_dir: str | os.PathLike[str]) -> ResetParams | None:
    """The reset parameters of the env classes under `source_dir`: subclasses of
    OpenEnv's `Environment` / `MCPEnvironment`, directly or through the project's own
    classes. Several env classes are merged (a key any of them takes is known). None
    when no env class with a `reset` is found.

    Every episode of an eval asks, so the answer is kept: parsed once per state of
    the source files (path, size, mtime), and the files are looked at again (a
    walk and a `stat` each) only once `RESET_PARAMS_RECHECK_S` have passed since.
    Thread-safe, and parses one tree at a time, since CPython 3.11's `ast` is not
    safe to use from several threads at once (it fails with "AST constructor
    recursion depth mismatch")."""
    root = Path(source_dir)
    with _reset_params_lock:
        recent = _reset_params_recent.get(str(root))
        if recent and time.monotonic() - recent[0] < RESET_PARAMS_RECHECK_S:
            return recent[1]
    files = _python_files(root)
    key = (str(root.resolve()), tuple(_file_stamp(path) for path in files))
    with _reset_params_lock:
        if key not in _reset_params_cache:
            if len(_reset_params_cache) >= _RESET_PARAMS_CACHE_SIZE:
                _reset_params_cache.clear()
                _reset_params_recent.clear()
            _reset_params_cache[key] = _parse_reset_params(root, files)
        _reset_params_recent[str(root)] = (time.monotonic(), _reset_params_cache[key])
        return _reset_params_cache[key]


RESET_PARAMS_RECHECK_S = 5.0
"""How long `read_reset_params` trusts its last look at a folder's files."""
_reset_params_lock = threading.Lock()
_reset_params_cache: dict[tuple[str, tuple[Any, ...]], ResetParams | None] = {}
_reset_params_recent: dict[str, tuple[float, ResetParams | None]] = {}
_RESET_PARAMS_CACHE_SIZE = 64


def _file_stamp(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), stat.st_size, stat.st_mtime_ns)


def _parse_reset_params(root: Path, files: list[Path]) -> ResetParams | None:
    # class name -> (base names, its reset / reset_async arguments, file)
    classes: dict[str, tuple[list[str], list[tuple[str, ast.arguments]], str]] = {}
    for path in files:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [
                    (item.name, item.args)
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and item.name in ("reset", "reset_async")
                ]
                bases = [_base_name(b) for b in node.bases]
                rel = str(path.relative_to(root))
                classes.setdefault(node.name, (bases, methods, rel))

    def is_env(name: str, seen: frozenset[str]) -> bool:
        return any(
            base in _ENV_BASES or (base not in seen and is_env(base, seen | {base}))
            for base in (classes[name][0] if name in classes else ())
        )

    names: set[str] = set()
    any_keyword, where = False, []
    for cls, (_, methods, rel) in classes.items():
        if not methods or not is_env(cls, frozenset({cls})):
            continue
        for method, args in methods:
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]  # no self
            names.update(p.arg for p in params)
            any_keyword = any_keyword or args.kwarg is not None
            where.append(f"{cls}.{method} in {rel}")
    if not where:
        return None
    return ResetParams(frozenset(names), any_keyword, ", ".join(sorted(where)))


def _python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
        )
        found += [Path(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
        if len(found) >= _MAX_SOURCE_FILES:
            break
    return found[:_MAX_SOURCE_FILES]


def _base_name(node: ast.expr) -> str:
    """`Environment` for `Environment`, `interfaces.Environment`, `Environment[A, O]`."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""
