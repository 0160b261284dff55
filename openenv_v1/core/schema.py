"""The live action contract of a server: its action schema and, for MCP envs, its tools.

`/schema` gives the action's JSON schema. An MCP env (its action is OpenEnv's generic
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
import functools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed

from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.http_client import async_client
from openenv_v1.core.mcp_route import DEADLOCK_HINT

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

    def example(self) -> dict[str, Any]:
        """A valid-looking action built from the schema, for format hints."""
        if self.is_mcp:
            tool = self.tools[0] if self.tools else None
            args = _example_object(tool.input_schema, {}) if tool else {}
            return {
                "type": "call_tool",
                "tool_name": tool.name if tool else "<tool>",
                "arguments": args,
            }
        return _example_object(self.schema, self.schema.get("$defs") or {})


_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _example_object(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    props = schema.get("properties") or {}
    required = schema.get("required") or list(props)
    return {
        name: _example_value(props[name], defs)
        for name in required
        if name in props and name not in _HIDDEN_FIELDS
    }


def _example_value(spec: dict[str, Any], defs: dict[str, Any]) -> Any:
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        spec = defs.get(ref.rsplit("/", 1)[-1], {})
    if "const" in spec:
        return spec["const"]
    if spec.get("enum"):
        return spec["enum"][0]
    if "default" in spec and spec["default"] is not None:
        return spec["default"]
    for option in spec.get("anyOf") or spec.get("oneOf") or ():
        if option.get("type") != "null":
            return _example_value(option, defs)
    kind = spec.get("type")
    if kind == "object":
        return _example_object(spec, defs)
    return {
        "string": "...",
        "integer": 0,
        "number": 0.0,
        "boolean": False,
        "array": [],
    }.get(kind, "...")


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
            response = await http.get(f"{base_url}/schema")
            response.raise_for_status()
            action = response.json()["action"]
        except Exception as e:
            raise EnvFailure(
                f"cannot read the action schema from {base_url}/schema: {describe(e)}"
            ) from e
        if not is_mcp_action(action):
            return ActionSpec(schema=action)
        tools = await _list_tools(client, http, base_url, timeout_s)
    return ActionSpec(schema=CALL_TOOL_SCHEMA, tools=tuple(tools))


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
        response = await http.post(
            f"{base_url}/mcp",
            json={"jsonrpc": "2.0", "method": "tools/list", "params": {}, "id": 1},
        )
        response.raise_for_status()
        body = response.json()
        if body.get("error"):
            raise RuntimeError(body["error"].get("message") or body["error"])
        return [Tool.from_wire(t) for t in body["result"]["tools"]]
    except Exception as e:
        raise EnvFailure(
            f"MCP env at {base_url}: tools could not be listed with a list_tools step "
            f"nor with JSON-RPC tools/list on /mcp: {describe(e)}"
        ) from e


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
