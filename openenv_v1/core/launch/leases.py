"""How a rollout leases a shared env server: the lease face, and its HTTP client.

A `ServerPool` lends its servers through `PoolLeases`' three calls: in its own
process by `ServerPool.local()` (`pool.LocalLeases`), from other processes of the
eval by `PoolClient` over the pool's loopback endpoint (`local_http`: a unix socket
and a token; `ServerPool.serve_http()`), whose actions are the `*_PATH` names.
`target.open_env` is the one caller: it leases, opens its session, and confirms or
hands the lease back.

Imports only `openenv_v1.core`'s shared modules: the pool imports this, never the
other way round.
"""

from __future__ import annotations

import contextlib
import os
from typing import Protocol

import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.local_http import local_client

LEASE_PATH = "lease"
CONFIRM_PATH = "confirm"
RELEASE_PATH = "release"
# Sends of one lease request to a pool's HTTP endpoint before the rollout gives up.
_LEASE_SEND_ATTEMPTS = 5


class PoolLeases(Protocol):
    """Where a rollout leases a shared server: a `ServerPool`'s `local()` leases, or
    `PoolClient` over its HTTP endpoint."""

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]: ...

    async def confirm(self, lease: str) -> None:
        """The server accepted the leased session."""

    async def release(self, lease: str) -> None: ...


class PoolClient:
    """The rollout side of a `ServerPool`'s lease endpoint. A request the endpoint
    could not take (a reset or refused connection in a burst) is sent again, a few
    times with backoff; the pool's answers themselves are not retried."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]:
        body = {"pid": os.getpid(), "rejected": rejected, "unreachable": unreachable}
        try:
            # The pool answers once a server is up or the wait is over: no timeout.
            async with local_client(self.url, None) as http:
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(httpx.TransportError),
                    stop=stop_after_attempt(_LEASE_SEND_ATTEMPTS),
                    wait=wait_exponential_jitter(multiplier=0.05, max=2.0),
                    reraise=True,
                ):
                    with attempt:
                        response = await http.post(f"/{LEASE_PATH}", json=body)
            reply = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise EnvFailure(
                f"the shared env server pool is unreachable: {describe(e)}"
            ) from e
        if response.status_code != 200:
            raise EnvFailure(reply.get("error") or f"HTTP {response.status_code}")
        return reply["lease"], reply["url"]

    async def confirm(self, lease: str) -> None:
        await self._tell(CONFIRM_PATH, lease)

    async def release(self, lease: str) -> None:
        await self._tell(RELEASE_PATH, lease)

    async def _tell(self, action: str, lease: str) -> None:
        """A notice the rollout need not wait on the answer of (a lost one is made
        up for by the pool: a dead process's leases are reclaimed)."""
        with contextlib.suppress(httpx.HTTPError):
            async with local_client(self.url, 5.0) as http:
                await http.post(f"/{action}", json={"lease": lease})
