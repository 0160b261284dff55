"""`OpenEnvTools`: native tool calling, the env's actions as the model's own tools.

    eval openenv-v1 --taskset.env org/env --taskset.tool-calls native --harness.id null

With `tool_calls="native"` each rollout gets this tool server (`python -m
openenv_v1.tools`, started by verifiers before the user simulator). Its tools are an
MCP env's own tools (name, description, input schema), or for any other env one tool,
`act`, whose parameters are the action schema. Each call is one step; its result comes
back as the tool message, and the account (reward, steps, done, invalid actions) goes
onto the rollout state, where the task's stops and reward read it as in text mode.

Who owns the env session: this server. In verifiers 0.2.x a toolset and the user
simulator are separate processes that share only the rollout state (pulled and pushed
over HTTP around each call); neither can reach the other's WebSocket, and tool calls
reach only the toolset. So the toolset launches or connects, reads the action contract,
resets and discovers the tools in `setup_task`, which verifiers runs before the server
listens and before the user simulator starts. It leaves the opening turn on the state;
`OpenEnvUser` sends it as the first user message and answers replies that call no
tool with a reminder. A toolset's tools are normally its decorated methods, fixed by
the class; these are known only after reset, so `register_tools` (the one place that
touches FastMCP's low-level server) lists and dispatches them, and
`publish_state` (the one place that uses verifiers' private state sync outside a
call) writes the opening before the server listens.

Retries: the null harness retries a tool call whose answer was lost on a fresh MCP
session, and MCP calls carry no idempotency key. A call is therefore keyed by the
model turn it belongs to (`state.turn`, stamped by the task's stops before each model
call), its tool and its arguments; a call with the key of the one before it is the
same delivery and gets that call's result without a second step (two identical calls
in one reply are taken as one). The step runs as a task of its own, so a retry that
arrives while the first attempt is still stepping (or after that attempt's request was
cancelled) waits for it rather than stepping again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.config import OpenEnvUserConfig
from openenv_v1.core import EnvEpisode, EnvFailure, EnvTarget, open_episode
from openenv_v1.core.errors import describe
from openenv_v1.core.schema import Tool
from openenv_v1.core.turns import Turn
from openenv_v1.user import OpenEnvData, OpenEnvState, account, mirror, user_message

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP
    from mcp.types import CallToolResult

logger = logging.getLogger(__name__)

ToolCall = Callable[[str, dict[str, Any]], Awaitable["CallToolResult"]]


class OpenEnvToolsConfig(OpenEnvUserConfig):
    """The user simulator's settings (placement, launch, limits, turns), which the
    tool server takes over in native mode; the taskset copies them."""

    url: str | None = None
    """Unused: the tool server is always launched per rollout."""


class OpenEnvTools(vf.Toolset[OpenEnvToolsConfig, OpenEnvState]):
    TOOL_PREFIX = None  # the model sees the env's own tool names

    def __init__(self, config: OpenEnvToolsConfig) -> None:
        super().__init__(config)
        self._episode: EnvEpisode | None = None
        self._tools: tuple[Tool, ...] = ()
        self._lock = asyncio.Lock()
        self._last: tuple[tuple[int, str, str], asyncio.Future[Turn]] | None = None

    async def setup_task(self, task: OpenEnvData) -> None:
        config = self.config
        target = EnvTarget(
            env=task.env,
            base_url=task.base_url,
            use_docker=task.use_docker,
            provider_kwargs=config.provider_kwargs,
            secret_env=config.secret_env,
            pool_url=None if task.base_url else config.pool_url,
            launch_timeout_s=config.launch_timeout_s,
            connect_timeout_s=config.connect_timeout_s,
            message_timeout_s=config.message_timeout_s(),
            web_ui=config.server_web_ui,
        )
        # Like the user simulator in text mode, never raise here: a failed setup
        # leaves the server unserved while verifiers probes it for minutes. The
        # failure goes on the state; the task's `openenv_done` stop raises it.
        failure: str | None = None
        opening: Turn | None = None
        try:
            episode = await open_episode(
                target,
                config.limits(),
                self._exit_stack,
                observation_format=config.observation_format,
                observation_images=config.observation_images,
                max_observation_chars=config.max_observation_chars,
                tool_calls="native",
            )
            opening = await episode.reset(task.reset)
            self._episode = episode
            self._tools = episode.spec.model_tools()
        except EnvFailure as e:
            failure = str(e)
        except Exception as e:
            logger.exception("OpenEnv setup failed")
            failure = f"{target.label}: setup failed: {describe(e)}"

        def publish() -> None:
            state = self.state
            state.tool_names = [tool.name for tool in self._tools]
            if self._episode is not None:
                mirror(self._episode.report, state)
            if failure is not None:
                state.done, state.stop_reason, state.error = True, "error", failure
            elif opening is not None:
                state.opening = [user_message(opening).model_dump(exclude_none=True)]

        await publish_state(self, publish)

    def _register(self, mcp: FastMCP) -> None:
        synced = self._with_state(self._deliver)

        async def call(name: str, arguments: dict[str, Any]) -> CallToolResult:
            # One call at a time, state sync included, so a racing retry sees the
            # first attempt's key and account.
            async with self._lock:
                return await synced(name, arguments)

        register_tools(mcp, self._tools, call)

    async def _deliver(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        state = self.state
        episode = self._episode
        if episode is None:
            return tool_result(
                Turn(f"The environment failed: {state.error}", failed=True)
            )
        key = (state.turn, name, json.dumps(arguments, sort_keys=True, default=str))
        if self._last is None or self._last[0] != key:
            # The simulator may have counted replies without a tool call since.
            known = account(state)
            report = episode.report
            report.invalid_actions = known.invalid_actions
            report.invalid_streak = known.invalid_streak
            if known.done and not report.done:
                report.done, report.stop_reason = True, known.stop_reason
            self._last = (key, asyncio.ensure_future(episode.call(name, arguments)))
        turn = await asyncio.shield(self._last[1])
        mirror(episode.report, state)
        return tool_result(turn)


def tool_result(turn: Turn) -> CallToolResult:
    """A turn as an MCP tool result: its text, then its images; `isError` when the
    call was not carried out as asked."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    content: list[Any] = [TextContent(type="text", text=turn.text)]
    content += [
        ImageContent(
            type="image",
            data=image.data_url().split(",", 1)[1],
            mimeType=image.mime,
        )
        for image in turn.images
    ]
    return CallToolResult(content=content, isError=turn.failed)


def register_tools(mcp: FastMCP, tools: Sequence[Tool], call: ToolCall) -> None:
    """Serve `tools` (known only at run time, each with its own JSON schema) from
    `mcp`, every call going to `call(name, arguments)`. FastMCP derives a tool's
    schema from a Python signature, so this registers the MCP list and call handlers
    on its low-level server instead (`_mcp_server`, the one private hook used)."""
    from mcp.types import Tool as MCPTool

    listed = [
        MCPTool(name=t.name, description=t.description, inputSchema=t.input_schema)
        for t in tools
    ]
    server = mcp._mcp_server

    @server.list_tools()
    async def list_tools() -> list[MCPTool]:
        return listed

    # Arguments are checked by the episode, which answers a mismatch as an invalid
    # call the model can read (and counts it).
    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any]) -> CallToolResult:
        return await call(name, arguments)


async def publish_state(server: vf.Toolset, update: Callable[[], None]) -> None:
    """Run `update` on the rollout state and push it, outside a tool call (the
    server's `setup_task`). Uses verifiers' own per-call state sync (`_with_state`)."""
    await server._with_state(update)()


if __name__ == "__main__":
    OpenEnvTools.run()
