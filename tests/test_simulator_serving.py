"""A verifiers 0.2 user simulator's MCP server answers each turn without waiting on
Nagle's algorithm, logging a line per request or reading package metadata per request
(`openenv_v1.vf02.simulator.serving`), as `OpenEnvUser` sets it up."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import socket

import pytest
from mcp.server.fastmcp import FastMCP

from openenv_v1.vf02.config import OpenEnvUserConfig
from openenv_v1.vf02.simulator.serving import no_delay_listeners
from openenv_v1.vf02.user import OpenEnvUser


@pytest.fixture(autouse=True)
def _mcp_log_level_restored():
    """`OpenEnvUser.setup` quiets mcp's loggers for the whole process, as it should
    in a simulator; not in this test worker."""
    mcp_logger = logging.getLogger("mcp")
    level = mcp_logger.level
    yield
    mcp_logger.setLevel(level)


def _bound_as_verifiers_binds() -> socket.socket:
    """The simulator's listener as `verifiers.v1.mcp.server.ServerBase._serve` makes
    it: protocol 0, so asyncio leaves Nagle on for what it accepts."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    return listener


async def _accepted_nodelay(listener: socket.socket) -> int:
    """TCP_NODELAY of a connection an asyncio server accepted on `listener`."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def on_connect(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connect, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(accepted, 10)
        finally:
            writer.close()


async def test_the_simulators_connections_do_without_nagle():
    untouched = _bound_as_verifiers_binds()
    assert not await _accepted_nodelay(untouched)  # the 40 ms wait it had
    listener = _bound_as_verifiers_binds()
    await OpenEnvUser(OpenEnvUserConfig()).setup()
    assert await _accepted_nodelay(listener)


async def test_a_probe_before_the_server_serves_waits_instead_of_being_refused():
    """verifiers' readiness probe, refused, sleeps a second before it asks again;
    once the simulator's setup has begun, it is queued and answered as soon as the
    server serves."""
    listener = _bound_as_verifiers_binds()
    port = listener.getsockname()[1]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    await OpenEnvUser(OpenEnvUserConfig()).setup()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"ping\n")  # before anything serves: it waits in the backlog

    async def echo(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        w.write(await r.readline())
        await w.drain()
        w.close()

    async with await asyncio.start_server(echo, sock=listener):
        assert await asyncio.wait_for(reader.readline(), 10) == b"ping\n"
    writer.close()


def test_listeners_only_are_changed():
    listener = _bound_as_verifiers_binds()
    peer = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(peer.getsockname())
    with listener, peer, client:
        assert no_delay_listeners() >= 2  # the bound one and the listening one
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        assert not client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


async def test_the_simulators_mcp_server_skips_per_request_logs_metadata_and_schemas():
    user = OpenEnvUser(OpenEnvUserConfig())
    await user.setup()
    mcp = FastMCP("user", stateless_http=True, json_response=True)
    user._register(mcp)
    assert not logging.getLogger("mcp.server.lowlevel.server").isEnabledFor(
        logging.INFO
    )
    assert logging.getLogger("mcp.server").isEnabledFor(logging.WARNING)
    version = importlib.metadata.version("mcp")
    assert mcp._mcp_server.version == version
    options = mcp._mcp_server.create_initialization_options()
    assert options.server_version == version
    # verifiers' `respond` tool, kept as it was but for its output schema, which
    # both ends would check each turn
    tool = mcp._tool_manager.get_tool("respond")
    assert tool.output_schema is None
    assert set(tool.parameters["properties"]) == {"message", "seq"}
