"""The user simulator's side of native tool calling: each forwarded tool call is
stepped once on the rollout's env session, and answered.

With `tool_calls="native"` the env session stays where text mode keeps it, in the
rollout's user simulator. verifiers 0.2.x sends the model's tool calls only to tool
servers, so the eval runs one shared tool server (`openenv_v1.vf02.tools`) that lists the
tools and forwards every call to the rollout's simulator: a plain HTTP POST to the
`/openenv/call` route that `serve_desk` adds to the simulator's own server (one
request, where an MCP call takes a session of its own). The simulator leaves the
tools and its address (`desk_url`) on the rollout state before it serves; the shared
server reads them there, under the rollout's state channel.

Retries: the null harness retries a tool call whose answer was lost, on a fresh
session, and MCP calls carry no idempotency key (the forwarder retries too). A call is
therefore keyed by the model turn it belongs to (`state.turn`, stamped by the task's
stops before each model call), its tool and its arguments; a call with the key of the
one before it is the same delivery and gets that call's result without a second step
(two identical calls in one reply are taken as one). The step runs as a task of its
own, so a retry that arrives while the first attempt is still stepping (or after that
attempt's request was cancelled) waits for it rather than stepping again.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_v1.core import EnvEpisode
from openenv_v1.core.turns import Turn
from openenv_v1.vf02.account import absorb_invalid, mirror

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP
    from mcp.types import CallToolResult

    from openenv_v1.vf02.user import OpenEnvState

DESK_PATH = "/openenv/call"
"""The simulator's route that steps one forwarded call: POST `{"name", "arguments"}`,
answered with `encode_turn`."""


class ToolDesk:
    """Delivers the model's tool calls to one episode, each exactly once."""

    def __init__(self, episode: EnvEpisode) -> None:
        self.episode = episode
        self._lock = asyncio.Lock()
        self._last: tuple[tuple[int, str, str], asyncio.Future[Turn]] | None = None

    async def deliver(
        self, state: OpenEnvState, name: str, arguments: dict[str, Any]
    ) -> Turn:
        """Step `name(arguments)` unless it is a redelivery of the last call, and
        leave the account on `state`."""
        key = (state.turn, name, json.dumps(arguments, sort_keys=True, default=str))
        async with self._lock:
            if self._last is None or self._last[0] != key:
                absorb_invalid(self.episode.report, state)
                step = asyncio.ensure_future(self.episode.call(name, arguments))
                self._last = (key, step)
            step = self._last[1]
        turn = await asyncio.shield(step)
        mirror(self.episode.report, state)
        return turn


def serve_desk(mcp: FastMCP, deliver: Any) -> None:
    """Add the `DESK_PATH` route to the simulator's server; `deliver(name,
    arguments)` (wrapped in verifiers' state sync by the caller) answers it."""
    from starlette.requests import Request
    from starlette.responses import Response

    @mcp.custom_route(DESK_PATH, methods=["POST"])
    async def openenv_call(request: Request) -> Response:
        call = await request.json()
        turn = await deliver(call["name"], call["arguments"])
        return Response(encode_turn(turn), media_type="application/json")


def desk_url() -> str:
    """This server's desk as another process on the same host reaches it, from the
    coordinates verifiers gives a server (`MCP_PORT`, or `MCP_PORT_FILE`, written
    before `setup_task` runs)."""
    port = os.environ.get("MCP_PORT") or Path(os.environ["MCP_PORT_FILE"]).read_text()
    return f"http://127.0.0.1:{int(port)}{DESK_PATH}"


def encode_turn(turn: Turn) -> str:
    """A turn as the desk's answer: text, images (base64 and MIME type), failed."""
    images = [
        {"data": image.data_url().split(",", 1)[1], "mime": image.mime}
        for image in turn.images
    ]
    return json.dumps({"text": turn.text, "images": images, "failed": turn.failed})


def tool_result(answer: str) -> CallToolResult:
    """The desk's answer as the model's tool result: its text, then its images;
    `isError` when the call was not carried out as asked."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    data = json.loads(answer)
    content: list[Any] = [TextContent(type="text", text=data["text"])]
    content += [
        ImageContent(type="image", data=image["data"], mimeType=image["mime"])
        for image in data["images"]
    ]
    return CallToolResult(content=content, isError=data["failed"])


def error_result(text: str) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)
