"""`OpenEnvHarness`: the model's side of an OpenEnv rollout on verifiers 0.2, in process.

verifiers 0.2's chat harness (`null`) runs a uv script per rollout (a `uv sync
--script`, then a Python process importing `openai` and `mcp`), and with tools fails
today (`openenv_v1.vf02.null_harness`). This harness does its work from the eval
process: model calls through the interception endpoint verifiers hands it, and each
tool call on the task's tool servers, until a reply calls no tool; the trace is the
one the null harness gives. The default harness of the `openenv-v1` tasksets
(`--harness.id null` pins verifiers' own); a harness runtime other than the default
is refused when the config is read.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Self

import verifiers.v1 as vf
from pydantic import model_validator

from openenv_v1.chat_calls import call_tools, function_tool, model_client
from openenv_v1.chat_opening import opening_messages
from openenv_v1.core.http_client import async_client

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import ContentBlock
    from openai.types.chat import ChatCompletionMessage

TOOL_CALL_ATTEMPTS = 4
"""Attempts of one tool call, each on a fresh MCP session. A call whose answer was
lost is sent again with the same arguments; the env steps it once
(`openenv_v1.vf02.tool_desk`)."""
LIST_TOOLS_TIMEOUT_S = 60.0


class OpenEnvHarnessConfig(vf.HarnessConfig):
    """The in-process chat harness. `runtime` stays the default subprocess runtime:
    the harness runs in the eval process, and the runtime only holds the rollout's
    working folder."""

    request_timeout_s: float | None = None
    """Seconds one request to verifiers' interception may take; unset, no limit of
    its own (verifiers' `--timeout.harness` bounds the rollout). With a user
    simulator one request holds a whole text-mode episode (every model turn and env
    step until a reply calls a tool or the episode ends), so a limit here cuts off
    slow models, not slow envs (`step_timeout_s` bounds those)."""
    tool_call_timeout_s: float = 600.0
    """Seconds one tool call may take (the env step bounds it first, with
    `--taskset.task.user.step-timeout-s`)."""

    @model_validator(mode="after")
    def _runs_here(self) -> Self:
        if not isinstance(self.runtime, vf.SubprocessConfig):
            raise ValueError(
                f"harness {self.id!r} runs in the eval process, so a "
                f"{self.runtime.type} runtime would only be started and stopped for "
                "nothing: drop --harness.runtime.type (and --harness.runtime.*), or "
                "pass --harness.id null to run verifiers' chat program there"
            )
        return self


class OpenEnvHarness(vf.Harness[OpenEnvHarnessConfig]):
    """A chat loop in the eval process: model calls through the interception, tool
    calls on the task's tool servers, until a reply calls no tool."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = True
    SUPPORTS_USER_SIM = True
    SUPPORTS_MESSAGE_PROMPT = True

    def __init__(self, config: OpenEnvHarnessConfig) -> None:
        super().__init__(config)
        # verifiers logs a warning for any harness but `null` on the subprocess
        # runtime ("local files may affect the evaluation; use docker or prime").
        # This one runs no program, and refuses those runtimes: drop it.
        _IN_PROCESS_IDS.add(config.id)
        logging.getLogger("verifiers.v1.env").addFilter(_no_local_program_warning)

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
    ) -> vf.ProgramResult:
        import openai

        messages = opening_messages(*self.resolve_prompt(trace.task.data))
        try:
            tools = await ToolServers.listed(mcp_urls, self.config.tool_call_timeout_s)
            async with model_client(
                endpoint, secret, self.config.request_timeout_s
            ) as client:
                await call_tools(client, ctx.model, messages, tools, _keeper(trace))
        except openai.APIError as e:
            # As a program's failed model call: ending after a `@stop` refused the
            # next call is expected, anything else fails the rollout with this text.
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"{e!r}")
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _keeper(
    trace: vf.Trace,
) -> Callable[[list[dict[str, Any]], ChatCompletionMessage], None]:
    """How each reply joins the messages: each request repeats the previous one's
    messages exactly and adds to them (trainers that keep token ids per turn see one
    growing sequence, one branch of the trace), so what the interception added to a
    request upstream (the user simulator's opening on the first, a reply that called
    no tool and the simulator's answer to it) is kept as it was sent, before the
    reply."""

    def keep(messages: list[dict[str, Any]], reply: ChatCompletionMessage) -> None:
        messages.extend(_added_upstream(trace, len(messages)))
        messages.append(reply.model_dump(exclude_none=True))

    return keep


def _added_upstream(trace: vf.Trace, sent: int) -> list[dict[str, Any]]:
    """The messages verifiers' interception added, upstream, to the harness's last
    request of `sent` messages, in their wire form: the trace's path to the reply
    just recorded, past the harness's own messages and before that reply (the user
    simulator's opening, when the task has no prompt; model turns it answered itself,
    with the simulator's user turns)."""
    from verifiers.v1.dialects.chat import message_to_wire

    if not trace.nodes:
        return []
    path = []
    index: int | None = len(trace.nodes) - 1
    while index is not None:
        node = trace.nodes[index]
        path.append(node.message)
        index = node.parent
    path.reverse()
    return [message_to_wire(m) for m in path[sent:-1]]


class ToolServers:
    """The task's MCP tool servers (name -> streamable-HTTP URL) as the model's
    tools. A server's tools are advertised as `<server>_<tool>`, or bare for a
    server named `""` (one whose `TOOL_PREFIX` is None, such as `OpenEnvTools`).
    verifiers' tool servers are stateless, so each listing and each call attempt
    opens a session of its own, inside the caller's task."""

    over = False
    """Never: the episode's end stops the rollout upstream (a `@stop` refuses the
    next model call)."""

    def __init__(self, urls: dict[str, str], call_timeout_s: float) -> None:
        self.urls = urls
        self.call_timeout_s = call_timeout_s
        self.specs: list[dict[str, Any]] = []
        """The `tools` of a chat completion request."""
        self.routes: dict[str, tuple[str, str]] = {}
        """Advertised name -> (server name, the server's tool name)."""

    @classmethod
    async def listed(cls, urls: dict[str, str], call_timeout_s: float) -> Self:
        """The servers at `urls` with their tools listed."""
        import asyncio

        servers = cls(urls, call_timeout_s)
        async with asyncio.timeout(LIST_TOOLS_TIMEOUT_S):
            for server, url in urls.items():
                async with _session(url, LIST_TOOLS_TIMEOUT_S) as session:
                    listing = await session.list_tools()
                for tool in listing.tools:
                    name = f"{server}_{tool.name}" if server else tool.name
                    if name in servers.routes:
                        raise ValueError(f"two tool servers advertise {name!r}")
                    servers.routes[name] = (server, tool.name)
                    servers.specs.append(
                        function_tool(name, tool.description or "", tool.inputSchema)
                    )
        return servers

    async def run(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        """The tool message answering the model's call `name(arguments)`, where
        `arguments` is the JSON text it wrote."""
        content = await self._answer(name, arguments)
        return {"role": "tool", "tool_call_id": call_id, "content": content}

    async def _answer(self, name: str, arguments: str) -> str | list[dict[str, Any]]:
        """A call that cannot be made (a tool the model was not given, arguments
        that are not a JSON object) is answered here, with what to do instead."""
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as e:
            return (
                f"error: invalid JSON in tool arguments ({e}); resend the call with "
                "valid JSON"
            )
        if not isinstance(parsed, dict):
            return (
                "error: tool arguments must be a JSON object, got "
                f"{type(parsed).__name__}; resend as an object"
            )
        if name not in self.routes:
            return f"error: unknown tool {name!r}"
        server, tool = self.routes[name]
        return _chat_content(await self._call(self.urls[server], tool, parsed))

    async def _call(
        self, url: str, tool: str, arguments: dict[str, Any]
    ) -> list[ContentBlock]:
        from tenacity import AsyncRetrying, stop_after_attempt, wait_exponential_jitter

        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(TOOL_CALL_ATTEMPTS),
            wait=wait_exponential_jitter(initial=0.2, max=5),
            reraise=True,
        ):
            with attempt:
                async with _session(url, self.call_timeout_s) as session:
                    return (await session.call_tool(tool, arguments)).content
        raise AssertionError("unreachable")


@contextlib.asynccontextmanager
async def _session(url: str, timeout_s: float) -> AsyncIterator[ClientSession]:
    """One initialized MCP session to the streamable-HTTP server at `url`."""
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        async_client(httpx.Timeout(timeout_s, connect=5.0)) as http,
        streamable_http_client(url, http_client=http, terminate_on_close=False) as (
            read,
            write,
            _,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _chat_content(blocks: list[ContentBlock]) -> str | list[dict[str, Any]]:
    """MCP result content as chat content: text alone, or text and `image_url` parts."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.type == "text":
            parts.append({"type": "text", "text": block.text})
        elif block.type == "image":
            url = f"data:{block.mimeType};base64,{block.data}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            parts.append({"type": "text", "text": block.model_dump_json()})
    if all(part["type"] == "text" for part in parts):
        return "\n".join(part["text"] for part in parts)
    return parts


_IN_PROCESS_IDS: set[str] = set()
"""Ids under which this harness was built in this process."""


def _no_local_program_warning(record: logging.LogRecord) -> bool:
    args = record.args if isinstance(record.args, tuple) else ()
    return not (
        str(record.msg).startswith("Harness %r is running in the subprocess runtime")
        and args[:1]
        and args[0] in _IN_PROCESS_IDS
    )


__all__ = ["OpenEnvHarness", "OpenEnvHarnessConfig"]
