"""The native tool server (`python -m openenv_v1.tools`) run as verifiers runs it, with
a stand-in for the rollout's state channel, and an MCP client calling it as the null
harness does (a fresh session per call)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from openenv_v1.tools import OpenEnvToolsConfig
from openenv_v1.user import OpenEnvData, OpenEnvState
from tests.servers import free_port, stop


class StateChannel:
    """The rollout's `/state` and `/task` endpoints, as verifiers' interception serves
    them, on a free port in a thread."""

    def __init__(self, task: OpenEnvData) -> None:
        self.task = task
        self.state = OpenEnvState()
        self.port = free_port()

        async def get_state(_: Request) -> Response:
            return Response(self.state.model_dump_json(), media_type="application/json")

        async def put_state(request: Request) -> Response:
            self.state = OpenEnvState.model_validate_json(await request.body())
            return JSONResponse({"ok": True})

        async def get_task(_: Request) -> Response:
            cls = f"{type(task).__module__}:{type(task).__qualname__}"
            return JSONResponse({"cls": cls, "task": task.model_dump_json()})

        app = Starlette(
            routes=[
                Route("/state", get_state, methods=["GET"]),
                Route("/state", put_state, methods=["PUT"]),
                Route("/task", get_task, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(app, port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/state"

    def __enter__(self) -> StateChannel:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        return self

    def __exit__(self, *_: Any) -> None:
        self.server.should_exit = True
        self.thread.join(5)


@contextlib.contextmanager
def tool_server(
    task: OpenEnvData, tmp_path: Path, **settings: Any
) -> Iterator[tuple[str, StateChannel]]:
    """The tool server for `task`, set up and listening; yields its MCP URL and the
    state channel it syncs with."""
    port_file = tmp_path / "tool-port"
    with StateChannel(task) as channel:
        env = {
            **os.environ,
            "VF_CONFIG": OpenEnvToolsConfig(**settings).model_dump_json(),
            "VF_STATE_URL": channel.url,
            "VF_STATE_SECRET": "secret",
            "MCP_PORT_FILE": str(port_file),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv_v1.tools"], env=env, start_new_session=True
        )
        try:
            url = _wait_serving(proc, port_file)
            yield url, channel
        finally:
            stop(proc)


def _wait_serving(proc: subprocess.Popen, port_file: Path) -> str:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tool server exited with {proc.returncode}")
        if port_file.exists() and port_file.read_text().strip().isdigit():
            url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(url, timeout=1)
                return url
        time.sleep(0.1)
    raise TimeoutError("tool server not serving within 60s")


async def list_tools(url: str) -> list[Any]:
    async with _session(url) as session:
        return (await session.list_tools()).tools


async def call_tool(url: str, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
    """(text of the result, isError)."""
    async with _session(url) as session:
        result = await session.call_tool(name, arguments)
    text = "\n".join(b.text for b in result.content if b.type == "text")
    return text, bool(result.isError)


@contextlib.asynccontextmanager
async def _session(url: str):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


def opening_text(channel: StateChannel) -> str:
    (message,) = channel.state.opening or [{}]
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)
