"""The eval's MCP clients (one per verifiers 0.2 user turn) share the process's TLS
context, and are otherwise mcp's own (`openenv_v1.vf02.simulator.mcp_clients`)."""

from __future__ import annotations

import httpx
import mcp.client.streamable_http as streamable_http
from mcp.shared._httpx_utils import create_mcp_http_client as mcps_own

from openenv_v1.core.http_client import shared_tls
from openenv_v1.vf02.simulator.mcp_clients import share_tls_context


def _tls_of(client: httpx.AsyncClient):
    return client._transport._pool._ssl_context  # httpx keeps it on its pool


async def test_verifiers_mcp_clients_share_one_tls_context(monkeypatch):
    monkeypatch.setattr(streamable_http, "create_mcp_http_client", mcps_own)
    share_tls_context()
    share_tls_context()  # once is enough; a second call changes nothing
    factory = streamable_http.create_mcp_http_client
    assert factory is not mcps_own
    timeout = httpx.Timeout(7.0)
    async with (
        factory(timeout=timeout) as first,
        factory(headers={"x-a": "1"}) as second,
        mcps_own(headers={"x-a": "1"}) as theirs,
    ):
        assert _tls_of(first) is _tls_of(second) is shared_tls()
        assert _tls_of(theirs) is not shared_tls()
        assert first.timeout == timeout
        assert second.timeout == theirs.timeout  # mcp's defaults
        assert second.headers["x-a"] == "1"
        assert second.trust_env == theirs.trust_env
