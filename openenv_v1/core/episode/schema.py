"""The live action contract of a server: its action schema and, for MCP envs, its tools.

The server is untrusted: `/schema` is read under one total deadline and at most
`MAX_SCHEMA_BYTES`, and every schema (the action's, each tool's input) is checked
before use (`schema_check.check_schema`). An MCP env (`is_mcp_action`) is driven by
`call_tool` actions; its tools are listed with a `list_tools` step, else with JSON-RPC
`tools/list` on `/mcp`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import sys
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
from websockets.exceptions import ConnectionClosed

from openenv_v1.core.episode.mcp_route import DEADLOCK_HINT
from openenv_v1.core.episode.schema_check import check_schema, resolve_local
from openenv_v1.core.episode.schema_example import HIDDEN_FIELDS, example_object
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

MAX_SCHEMA_BYTES = 4 * 1024 * 1024
"""The largest `/schema` (or JSON-RPC `tools/list`) body read from a server."""

ACT_TOOL = "act"
"""The one tool of a non-MCP env in native tool calling: its arguments are the action."""


class KnownContracts(Protocol):
    """Servers' contracts kept by URL (`leases.ServerContracts`)."""

    def get(self, url: str) -> Any | None: ...

    def put(self, url: str, contract: Any) -> None: ...


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
        return {k: v for k, v in props.items() if k not in HIDDEN_FIELDS}

    @functools.cached_property
    def required(self) -> list[str]:
        return [f for f in self.schema.get("required") or [] if f not in HIDDEN_FIELDS]

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
        env's tools; for any other env one tool, `act`, taking the action."""
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
        """An action the schema accepts, for format hints (`schema_example`), or None
        when none can be built; for an MCP env, a call of its first tool."""
        if self.is_mcp:
            tool = self.tools[0] if self.tools else None
            args = example_object(tool.input_schema) if tool else {}
            if args is None:
                return None
            return {
                "type": "call_tool",
                "tool_name": tool.name if tool else "<tool>",
                "arguments": args,
            }
        return example_object(self.schema)


_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def is_mcp_action(schema: dict[str, Any]) -> bool:
    """Whether the action schema is OpenEnv's MCP call-tool action: by title, a `type`
    of `call_tool`, or a union (`oneOf` / `anyOf`, e.g. of `ListToolsAction` and
    `CallToolAction`) with a `call_tool` branch."""
    if schema.get("title") in MCP_ACTION_TITLES:
        return True
    mapping = (schema.get("discriminator") or {}).get("mapping") or {}
    if "call_tool" in mapping:
        return True
    for branch in schema.get("oneOf") or schema.get("anyOf") or ():
        ref = branch.get("$ref") if isinstance(branch, dict) else None
        if isinstance(ref, str):
            branch = resolve_local(schema, ref)
        if isinstance(branch, dict) and branch.get("title") == "CallToolAction":
            return True
    type_spec = (schema.get("properties") or {}).get("type") or {}
    return "call_tool" in (type_spec.get("const"), type_spec.get("default")) or (
        "call_tool" in (type_spec.get("enum") or ())
    )


async def fetch_action_spec(
    client: Any,
    base_url: str,
    timeout_s: float = 10.0,
    connect_timeout_s: float = 10.0,
    known: KnownContracts | None = None,
) -> ActionSpec:
    """Read the server's action contract; each request gets `timeout_s`, and its
    connection at most `connect_timeout_s` (one not made in time raises
    `httpx.ConnectTimeout` as the cause: a server lost, not a slow one). With
    `known`, a plain env's checked contract is taken from it when it holds
    `base_url`'s, and put there when read; an MCP env's tools are listed on every
    session."""
    spec = known.get(base_url) if known is not None else None
    if isinstance(spec, ActionSpec):
        return spec
    timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, connect_timeout_s))
    async with async_client(timeout) as http:
        try:
            body = await _read_json(http, "GET", f"{base_url}/schema", timeout_s)
            action = body["action"]
        except Exception as e:
            raise EnvFailure(
                f"cannot read the action schema from {base_url}/schema: {describe(e)}"
            ) from e
        check_schema(action, f"the action schema at {base_url}/schema")
        if not is_mcp_action(action):
            spec = ActionSpec(schema=action)
            if known is not None:
                known.put(base_url, spec)
            return spec
        tools = await _list_tools(client, http, base_url, timeout_s)
    return ActionSpec(schema=CALL_TOOL_SCHEMA, tools=tools)


async def _read_json(
    http: httpx.AsyncClient, method: str, url: str, timeout_s: float, **kwargs: Any
) -> Any:
    """The JSON body of one request, all of it read within `timeout_s` (the client's
    timeout bounds each read only) and at most `MAX_SCHEMA_BYTES`."""
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
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError(
            "the body is nested too deep to decode (deeper than the JSON decoder's "
            f"limit of about {sys.getrecursionlimit()} levels)"
        ) from None


async def _list_tools(
    client: Any, http: httpx.AsyncClient, base_url: str, timeout_s: float
) -> tuple[Tool, ...]:
    """An MCP env's tools, every input schema checked."""
    tools = await _listed_tools(client, http, base_url, timeout_s)
    for tool in tools:
        check_schema(
            tool.input_schema, f"the input schema of tool {tool.name!r} at {base_url}"
        )
    return tuple(tools)


async def _listed_tools(
    client: Any, http: httpx.AsyncClient, base_url: str, timeout_s: float
) -> list[Tool]:
    try:
        result = await asyncio.wait_for(client.step({"type": "list_tools"}), timeout_s)
        raw = result.observation.get("tools")
        if isinstance(raw, list):
            return [Tool.from_wire(t) for t in raw]
    except (TimeoutError, ConnectionClosed) as e:
        # The JSON-RPC fallback would not be answered either, and the session is
        # now unusable (a blocked loop stops answering pings: the client closes).
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
    """`spec` with an MCP env's tools listed again, as `fetch_action_spec` lists them."""
    async with async_client(timeout_s) as http:
        tools = await _list_tools(client, http, base_url, timeout_s)
    return dataclasses.replace(spec, tools=tools)


def tools_in(observation: dict[str, Any]) -> tuple[Tool, ...] | None:
    """The tools a step's observation reports (as a `list_tools` step answers), or
    None."""
    raw = observation.get("tools") if isinstance(observation, dict) else None
    if not isinstance(raw, list) or not raw:
        return None
    if not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in raw):
        return None
    return tuple(Tool.from_wire(t) for t in raw)
