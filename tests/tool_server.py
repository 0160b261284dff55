"""Native tool calling's two servers, the rollout's user simulator (`python -m
openenv_v1.vf02.user`) and the eval's tool server (`python -m openenv_v1.vf02.tools`), run as
verifiers runs them, with a stand-in for the rollout's state channel, and an MCP
client calling them as the null harness and verifiers' host do (a fresh session per
call)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
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

from openenv_v1.vf02.config import OpenEnvUserConfig
from openenv_v1.vf02.tools import OpenEnvToolsConfig
from openenv_v1.vf02.user import OpenEnvData, OpenEnvState
from tests.servers import stop


class StateChannel:
    """The rollout's `/state` and `/task` endpoints, as verifiers' interception serves
    them, on a free port in a thread."""

    def __init__(self, task: OpenEnvData) -> None:
        self.task = task
        self.state = OpenEnvState()
        # Bound here and handed to uvicorn: no other process can take the port first.
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]

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
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

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
        self.socket.close()


@contextlib.contextmanager
def native_servers(
    task: OpenEnvData, tmp_path: Path, tools_url: str | None = None, **settings: Any
) -> Iterator[tuple[str, str, StateChannel]]:
    """The rollout's user simulator, set up and serving, and the eval's tool server
    (`tools_url`, or one started beside the simulator), each run as verifiers runs it;
    yields the tool server's URL tagged with the rollout's state channel (as verifiers
    hands it to the harness), the simulator's URL, and the channel."""
    with StateChannel(task) as channel, contextlib.ExitStack() as stack:
        channel_env = {"VF_STATE_URL": channel.url, "VF_STATE_SECRET": "secret"}
        config = OpenEnvUserConfig(**settings)
        user = _spawn(
            stack, "openenv_v1.vf02.user", config, tmp_path / "user", channel_env
        )
        tools = _spawn(
            stack, "openenv_v1.vf02.tools", OpenEnvToolsConfig(), tmp_path / "tools"
        )
        yield tagged(_wait_serving(*tools), channel), _wait_serving(*user), channel


@contextlib.contextmanager
def tool_server(tmp_path: Path) -> Iterator[str]:
    """The eval's tool server, with no rollout of its own; yields its MCP URL."""
    with contextlib.ExitStack() as stack:
        config = OpenEnvToolsConfig()
        yield _wait_serving(
            *_spawn(stack, "openenv_v1.vf02.tools", config, tmp_path / "tools")
        )


def tagged(url: str, channel: StateChannel) -> str:
    """A shared server's URL as one rollout's harness reaches it."""
    return f"{url}?vf_state_url={channel.url}&vf_state_secret=secret"


def _spawn(
    stack: contextlib.ExitStack,
    module: str,
    config: Any,
    name: Path,
    extra: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, Path]:
    """Start `python -m module` as verifiers starts a server (stopped by `stack`);
    returns it and the file it writes its port to."""
    port_file = name.with_name(f"{name.name}-port")
    env = {
        **os.environ,
        **(extra or {}),
        "VF_CONFIG": config.model_dump_json(),
        "MCP_PORT_FILE": str(port_file),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", module], env=env, start_new_session=True
    )
    stack.callback(stop, proc)
    return proc, port_file


def _wait_serving(proc: subprocess.Popen, port_file: Path) -> str:
    import httpx

    deadline = time.monotonic() + 120
    with httpx.Client(timeout=1, trust_env=False) as http:  # one for every poll
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}")
            if port_file.exists() and port_file.read_text().strip().isdigit():
                url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
                with contextlib.suppress(httpx.HTTPError):
                    http.get(url)
                    return url
            time.sleep(0.1)
    raise TimeoutError("server not serving within 120s")


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


async def respond(user_url: str, message: str, seq: int) -> list[dict[str, Any]]:
    """One `respond` turn of the simulator, as verifiers' host drives it."""
    async with _session(user_url) as session:
        result = await session.call_tool("respond", {"message": message, "seq": seq})
    return json.loads(result.content[0].text)["messages"]


def opening_text(user_url: str) -> str:
    (message,) = asyncio.run(respond(user_url, "", 0))
    content = message["content"]
    return content if isinstance(content, str) else json.dumps(content)
