"""MCP clients of the eval process that share its TLS context.

verifiers 0.2 plays every user turn with a fresh MCP session to the rollout's user
simulator (`verifiers.v1.mcp.launch.user_session`), and each session makes a new
httpx client through mcp's `create_mcp_http_client`, which loads the CA bundle into
a new TLS context (~25 ms of CPU) although the simulator is reached over plain HTTP
on loopback. At 256 rollouts in flight that was 29% of the eval's CPU (py-spy).
verifiers looks the factory up on `mcp.client.streamable_http` at each call, so
`share_tls_context()` puts one there that builds the same client (mcp's default
timeouts, the caller's headers and auth) with the process's shared context
(`openenv_v1.core.http_client`). Nothing on disk is changed; only the process that
calls it (the eval, or an `eval --server` worker) is affected.

    share_tls_context()     # once, when the taskset is built
"""

from __future__ import annotations

from typing import Any

import httpx

from openenv_v1.core.http_client import shared_tls


def share_tls_context() -> None:
    """Make mcp's HTTP client factory, as verifiers calls it, use the shared TLS
    context. Idempotent."""
    import mcp.client.streamable_http as streamable_http
    from mcp.shared import _httpx_utils

    if getattr(streamable_http.create_mcp_http_client, "_openenv_v1", False):
        return

    def create_mcp_http_client(
        headers: dict[str, str] | None = None,
        timeout: httpx.Timeout | None = None,
        auth: httpx.Auth | None = None,
    ) -> httpx.AsyncClient:
        if timeout is None:
            timeout = httpx.Timeout(
                _httpx_utils.MCP_DEFAULT_TIMEOUT,
                read=_httpx_utils.MCP_DEFAULT_SSE_READ_TIMEOUT,
            )
        kwargs: dict[str, Any] = {"timeout": timeout, "verify": shared_tls()}
        if headers is not None:
            kwargs["headers"] = headers
        if auth is not None:
            kwargs["auth"] = auth
        return httpx.AsyncClient(**kwargs)

    create_mcp_http_client._openenv_v1 = True  # type: ignore[attr-defined]
    streamable_http.create_mcp_http_client = create_mcp_http_client  # type: ignore[assignment]


__all__ = ["share_tls_context"]
