"""The user simulator's side of native tool calling: each forwarded tool call is
stepped once on the rollout's env session, and answered.

verifiers 0.2 sends the model's tool calls only to tool servers, so the eval's tool
server (`openenv_v1.vf02.tools`) forwards every call to the rollout's simulator,
which keeps the env session: one HTTP POST to the simulator's desk. The desk is an
endpoint of its own (`open_desk`, a `local_http.LocalEndpoint`: a unix socket in a
0700 directory, a per-rollout token), not a route of the simulator's MCP server (a
TCP port any local process can reach); its address travels only on the rollout
state, which verifiers keeps out of every dump.

Retries: the harness and the forwarder both retry a call whose answer was lost, and
MCP calls carry no idempotency key. A call is therefore keyed by its model turn
(`state.turn`, stamped by the task's stops), its tool and its arguments; a call with
the key of the one before it gets that call's result without a second step (two
identical calls in one reply are taken as one). The step runs as a task of its own,
so a retry that arrives while it is still stepping waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from openenv_v1.core import EnvEpisode
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.local_http import LocalEndpoint, parse_address
from openenv_v1.vf02.account import absorb_invalid, mirror

if TYPE_CHECKING:
    from mcp.types import CallToolResult

    from openenv_v1.vf02.state import OpenEnvState

DESK_PATH = "call"
"""The desk's one path: POST `{"name", "arguments"}`, answered with `encode_turn`."""
DESK_NAME = "desk"


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


async def open_desk(
    deliver: Callable[[str, dict[str, Any]], Awaitable[Turn]],
    stack: contextlib.AsyncExitStack,
) -> str:
    """Serve the desk on the running loop until `stack` closes; returns its address.
    `deliver(name, arguments)` (wrapped in verifiers' state sync by the caller)
    answers each call."""

    async def answer(path: str, body: dict[str, Any]) -> tuple[int, Mapping[str, Any]]:
        if path != DESK_PATH:
            return 404, {"error": f"unknown path {path!r}"}
        name, arguments = body.get("name"), body.get("arguments")
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return 400, {"error": "a call is {name: string, arguments: object}"}
        return 200, encode_turn(await deliver(name, arguments))

    desk = LocalEndpoint(answer, name=DESK_NAME)
    stack.push_async_callback(desk.aclose)
    return await desk.start()


def check_desk_address(address: str) -> str:
    """`address` if it names a desk (`open_desk`); `ValueError` otherwise. The
    state it comes from is the caller's: a forged one must not point the tool
    server at another socket."""
    path, _ = parse_address(address)
    folder, name = os.path.split(path)
    if name != f"{DESK_NAME}.sock" or not os.path.basename(folder).startswith(
        f"openenv-v1-{DESK_NAME}-"
    ):
        raise ValueError(f"not a tool desk: {path!r}")
    return address


def encode_turn(turn: Turn) -> dict[str, Any]:
    """A turn as the desk's answer: text, images (base64 and MIME type), failed."""
    images = [
        {"data": image.data_url().split(",", 1)[1], "mime": image.mime}
        for image in turn.images
    ]
    return {"text": turn.text, "images": images, "failed": turn.failed}


def tool_result(data: Mapping[str, Any]) -> CallToolResult:
    """The desk's answer as the model's tool result: its text, then its images;
    `isError` when the call was not carried out as asked."""
    from mcp.types import CallToolResult, ImageContent, TextContent

    content: list[Any] = [TextContent(type="text", text=data["text"])]
    content += [
        ImageContent(type="image", data=image["data"], mimeType=image["mime"])
        for image in data["images"]
    ]
    return CallToolResult(content=content, isError=data["failed"])


def error_result(text: str) -> CallToolResult:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)
