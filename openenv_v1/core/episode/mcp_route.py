"""How an MCP env's tools are called: by steps, or by the session's JSON-RPC.

A server on openenv-core 0.2.2 deadlocks on `list_tools` / `call_tool` steps over
`/ws`: each session holds its env's MCP client open on the server's event loop, while
`MCPEnvironment.step` runs the tools on a second loop that waits on the first (0.2.3
added `step_async`). The same session answers JSON-RPC `tools/list` and `tools/call`
as `mcp` messages on its own loop, so `route_mcp_steps` puts a `SessionRpcClient` in
front of the client of an env whose `uv.lock` pins 0.2.2. A server reached by URL
gives no sign of its version and keeps steps.

On this route a tool call is still a step of the episode, but the env's `step()` does
not run: no reward, never `done`.
"""

from __future__ import annotations

import functools
import itertools
import logging
import re
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

DEADLOCKING_CORE = "0.2.2"
"""The openenv-core release whose MCP steps deadlock over `/ws` (0.2.1 opens no MCP
session per env; 0.2.3 has `MCPEnvironment.step_async`)."""

DEADLOCK_HINT = (
    "a known cause: servers on openenv-core 0.2.2 deadlock on MCP steps over /ws, "
    "some stopping to answer at all; pin openenv-core>=0.2.3 in the env"
)
"""What a hung MCP step most likely means, and what to do (for error messages)."""

RPC_ROUTE_NOTE = (
    "sent as the session's JSON-RPC: its uv.lock pins openenv-core 0.2.2, whose MCP "
    "steps deadlock over /ws; the env's step() does not run (no reward or done from "
    "tool calls)"
)
"""How a report says that an env's tool calls take the JSON-RPC route."""

_warned: set[str] = set()
# A `[[package]]` entry of uv.lock starts with its name, then its version.
_LOCKED_CORE = re.compile(
    r'^\[\[package\]\]\nname = "openenv-core"\nversion = "(?P<version>[^"]+)"', re.M
)


def locked_core_version(project_dir: str | Path) -> str | None:
    """The openenv-core version the project's `uv.lock` pins, or None. Asked per
    rollout: read once per state of the lock (size, mtime), and searched, not parsed."""
    lock = Path(project_dir) / "uv.lock"
    try:
        stat = lock.stat()
    except OSError:
        return None
    return _locked_core_version(str(lock), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _locked_core_version(lock: str, size: int, mtime_ns: int) -> str | None:
    try:
        text = Path(lock).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    found = _LOCKED_CORE.search(text)
    return found["version"] if found else None


def needs_session_rpc(project_dir: str | Path | None) -> bool:
    """Whether the env served from `project_dir` (None: not known) must have its MCP
    tools called through the session's JSON-RPC: its lock pins openenv-core 0.2.2."""
    return (
        project_dir is not None and locked_core_version(project_dir) == DEADLOCKING_CORE
    )


def route_mcp_steps(client: Any, project_dir: str | Path | None, label: str) -> Any:
    """`client`, or a `SessionRpcClient` over it when the env served from
    `project_dir` deadlocks on MCP steps (`needs_session_rpc`)."""
    return SessionRpcClient(client, label) if needs_session_rpc(project_dir) else client


class SessionRpcClient:
    """An OpenEnv client whose MCP steps go to the same session as JSON-RPC `mcp`
    messages, answered in the shape of the steps they replace; all else is the
    wrapped client's."""

    def __init__(self, client: Any, label: str) -> None:
        self.client = client
        self.label = label
        self._ids = itertools.count(1)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    async def step(self, action: dict[str, Any], **kwargs: Any) -> Any:
        kind = action.get("type")
        if kind in ("list_tools", "call_tool"):
            self._say_once()
        if kind == "list_tools":
            result, error = await self._rpc("tools/list", {})
            if error is not None:
                raise RuntimeError(
                    f"JSON-RPC tools/list failed: {error.get('message')}"
                )
            tools = (result or {}).get("tools") or []
            return self._step_result({"tools": [_tool(t) for t in tools]})
        if kind == "call_tool":
            name = action.get("tool_name")
            params = {"name": name, "arguments": action.get("arguments") or {}}
            result, error = await self._rpc("tools/call", params)
            observation = {"tool_name": name, "result": result, "error": None}
            if error is not None:
                observation["error"] = _tool_error(error)
            return self._step_result(observation)
        return await self.client.step(action, **kwargs)

    def _say_once(self) -> None:
        if self.label in _warned:
            return
        _warned.add(self.label)
        logger.warning("%s: MCP tool calls %s", self.label, RPC_ROUTE_NOTE)

    async def _rpc(
        self, method: str, params: dict[str, Any]
    ) -> tuple[Any, dict[str, Any] | None]:
        """One JSON-RPC request on the session: its result, or its error. A frame
        of the session's own (`type: error`) raises as a step's does."""
        # Both OpenEnv client lines send a message and read its answer with the
        # private `_send_and_receive`; no public call sends an `mcp` message.
        request = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": method,
            "params": params,
        }
        response = await self.client._send_and_receive({"type": "mcp", "data": request})
        data = response.get("data") or {}
        error = data.get("error")
        if error is not None:
            return None, error if isinstance(error, dict) else {"message": str(error)}
        return data.get("result"), None

    def _step_result(self, observation: dict[str, Any]) -> Any:
        # The client's own parser, so the result is the type its steps return.
        return self.client._parse_result(
            {"observation": observation, "reward": None, "done": False}
        )


def _tool(raw: Any) -> dict[str, Any]:
    """An MCP tool as a `list_tools` step lists it: name, description, input_schema."""
    raw = raw if isinstance(raw, dict) else {}
    return {
        "name": raw.get("name"),
        "description": raw.get("description") or "",
        "input_schema": raw.get("inputSchema") or raw.get("input_schema") or {},
    }


def _tool_error(error: dict[str, Any]) -> dict[str, str]:
    """A failed JSON-RPC `tools/call` as the `error` of a `call_tool` step, its type
    told from the message as OpenEnv's `MCPEnvironment` tells it."""
    message = str(error.get("message") or "the tool call failed")
    lowered = message.lower()
    if "not found" in lowered or "unknown tool" in lowered:
        kind = "tool_not_found"
    elif "invalid" in lowered or "argument" in lowered:
        kind = "invalid_args"
    else:
        kind = "execution_error"
    return {"error_type": kind, "message": message}
