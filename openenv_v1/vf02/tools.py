"""`OpenEnvTools`: native tool calling, the env's actions as the model's own tools.

With `tool_calls="native"` the taskset declares this tool server; verifiers starts
one per eval (or per env-server worker) and tags each rollout's connection with the
rollout's state channel. Its tools are those the rollout's user simulator left on
the state after reset (an MCP env's own, or one `act` tool taking the action); each
call is forwarded to that simulator's desk, which steps it once
(`openenv_v1.vf02.tool_desk`), and its answer comes back as the tool message.
"""

from __future__ import annotations

if __name__ == "__main__":
    # Each call brings its rollout's state channel secret: keep this process's
    # memory from env servers of the same user (`server_env`).
    from openenv_v1.core.launch.server_env import hide_this_process

    hide_this_process()
    # Before verifiers is imported: the tool server, like a simulator, never calls
    # the packages a full import brings (3 s of CPU per eval on 2 cores).
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.vf02.state import OpenEnvState
from openenv_v1.vf02.tool_desk import check_desk_address, error_result, tool_result

if TYPE_CHECKING:
    from mcp.types import CallToolResult
    from mcp.types import Tool as MCPTool

DESK_ATTEMPTS = 4
"""Attempts to reach the rollout's simulator (it steps a repeated call only once)."""


class OpenEnvToolsConfig(vf.SharedToolsetConfig):
    """The eval's native tool server: placement only, nothing to set."""


class OpenEnvTools(vf.Toolset[OpenEnvToolsConfig, OpenEnvState]):
    TOOL_PREFIX = None  # the model sees the env's own tool names

    def _register(self, mcp: Any) -> None:
        register_tools(
            mcp, self._with_state(self._list), self._with_state(self._forward)
        )

    async def _list(self) -> list[MCPTool]:
        from mcp.types import Tool as MCPTool

        return [
            MCPTool(
                name=tool["name"],
                description=tool.get("description"),
                inputSchema=tool["input_schema"],
            )
            for tool in self.state.tools or ()
        ]

    async def _forward(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        state = self.state
        if not state.tool_desk:
            reason = state.account.error or "no env session for this rollout"
            return error_result(f"The environment failed: {reason}")
        try:
            address = check_desk_address(state.tool_desk)
        except ValueError as e:
            return error_result(f"The environment failed: {e}")
        return tool_result(await call_desk(address, name, arguments))


async def call_desk(address: str, name: str, arguments: dict[str, Any]) -> Any:
    """Forward one call to the simulator's desk at `address`; its answer. A request
    that failed on the way is sent again (the desk steps a repeated call only
    once)."""
    import httpx
    from tenacity import (
        AsyncRetrying,
        retry_if_exception_type,
        stop_after_attempt,
        wait_exponential_jitter,
    )

    from openenv_v1.core.local_http import local_client

    async for attempt in AsyncRetrying(
        stop=stop_after_attempt(DESK_ATTEMPTS),
        wait=wait_exponential_jitter(initial=0.2, max=5),
        retry=retry_if_exception_type(httpx.TransportError),
        reraise=True,
    ):
        with attempt:
            # No read limit of its own: the episode bounds the step
            # (`step_timeout_s`).
            timeout = httpx.Timeout(None, connect=5)
            async with local_client(address, timeout) as client:
                response = await client.post(
                    "/call", json={"name": name, "arguments": arguments}
                )
            response.raise_for_status()
            return response.json()
    raise AssertionError("unreachable")


def register_tools(
    mcp: Any,
    list_tools: Callable[[], Awaitable[list[MCPTool]]],
    call: Callable[[str, dict[str, Any]], Awaitable[CallToolResult]],
) -> None:
    """Serve tools known only at run time (each with its own JSON schema) from the
    FastMCP server `mcp`: `list_tools()` lists them, every call goes to
    `call(name, arguments)`. FastMCP derives a tool's schema from a Python signature,
    so this registers the MCP list and call handlers on its low-level server instead
    (`_mcp_server`, the one private hook used)."""
    server = mcp._mcp_server
    server.list_tools()(list_tools)
    # Arguments are checked by the episode, which answers a mismatch as an invalid
    # call the model can read (and counts it).
    server.call_tool(validate_input=False)(call)


if __name__ == "__main__":
    OpenEnvTools.run()
