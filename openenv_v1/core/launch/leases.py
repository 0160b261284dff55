"""Both ends of a lease: `PoolLeases`' three calls (lease, confirm, release), in the
desk's process (`LocalLeases`) or from the eval's other processes (`PoolClient`,
over the desk's `local_http` endpoint, whose requests `answer_lease_request`
answers). `target.open_env` is the one caller. The desks import this, never the
other way round.

A desk also keeps `contracts`: what the episodes of its process learned of each
leased server's contract (`schema.fetch_action_spec`), so only the first episode on a
server reads it; a server released as lost is forgotten. Opening and resetting a
Wordle episode cost the eval 4.7-5.2 ms of CPU with a `/schema` read each (a new
connection, a request, the schema checked), 1.4-1.5 ms without.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

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
CONTRACTS_KEPT = 256
"""Servers whose contract a `ServerContracts` keeps at most (the least recently used
goes first)."""


class ServerContracts:
    """What episodes learned of a server's contract, by its URL: kept for the
    servers most recently used, forgotten when one is lost."""

    def __init__(self, limit: int = CONTRACTS_KEPT) -> None:
        self._known: OrderedDict[str, Any] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()  # a desk's endpoint thread forgets too

    def get(self, url: str) -> Any | None:
        with self._lock:
            known = self._known.get(url)
            if known is not None:
                self._known.move_to_end(url)
            return known

    def put(self, url: str, contract: Any) -> None:
        with self._lock:
            self._known[url] = contract
            self._known.move_to_end(url)
            while len(self._known) > self._limit:
                self._known.popitem(last=False)

    def forget(self, url: str) -> None:
        with self._lock:
            self._known.pop(url, None)


class PoolLeases(Protocol):
    """Where a rollout leases a shared server; `contracts`, where its episodes keep
    what they learned of each server's contract (None: nowhere)."""

    contracts: ServerContracts | None

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]: ...

    async def confirm(self, lease: str) -> None:
        """The server accepted the leased session."""

    async def release(self, lease: str, lost: bool = False) -> None:
        """The session is over; `lost`: its server failed it (`ServerPool.release`)."""


class LeaseDesk(Protocol):
    """A desk's side of a lease (`lease_book.LeaseDeskBase`)."""

    contracts: ServerContracts

    async def lease_async(
        self,
        rejected: str | None = None,
        unreachable: str | None = None,
        pid: int | None = None,
    ) -> tuple[str, str]: ...

    def confirm(self, lease_id: str) -> None: ...

    def release(self, lease_id: str, lost: bool = False) -> None: ...


class LocalLeases:
    """A desk's leases for rollouts in its own process: no socket, no thread."""

    def __init__(self, pool: LeaseDesk) -> None:
        self._pool = pool
        self.contracts: ServerContracts | None = pool.contracts

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]:
        return await self._pool.lease_async(rejected=rejected, unreachable=unreachable)

    async def confirm(self, lease: str) -> None:
        self._pool.confirm(lease)

    async def release(self, lease: str, lost: bool = False) -> None:
        # No await: a cancelled rollout's exit stack still hands the lease back.
        self._pool.release(lease, lost)


class PoolClient:
    """The rollout side of a desk's lease endpoint. A request it could not take (a
    reset or refused connection in a burst) is sent again, a few times with
    backoff; the desk's answers are not retried."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.contracts: ServerContracts | None = None
        """None: a process leasing over HTTP runs one episode (a 0.2 simulator)."""

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
        await self._tell(CONFIRM_PATH, {"lease": lease})

    async def release(self, lease: str, lost: bool = False) -> None:
        await self._tell(RELEASE_PATH, {"lease": lease, "lost": lost})

    async def _tell(self, action: str, body: dict[str, Any]) -> None:
        """A notice not waited on (a dead process's leases are reclaimed)."""
        with contextlib.suppress(httpx.HTTPError):
            async with local_client(self.url, 5.0) as http:
                await http.post(f"/{action}", json=body)


async def answer_lease_request(
    pool: LeaseDesk, action: str, body: dict[str, Any]
) -> tuple[int, Mapping[str, Any]]:
    """One request to `pool`'s lease endpoint: 200 with the answer, 503 with the
    pool's `EnvFailure`, 400 for a malformed body, 404 for an unknown action."""
    try:
        if action == LEASE_PATH:
            lease_id, url = await pool.lease_async(
                rejected=_optional_str(body.get("rejected")),
                unreachable=_optional_str(body.get("unreachable")),
                pid=int(body["pid"]),
            )
            return 200, {"lease": lease_id, "url": url}
        if action == CONFIRM_PATH:
            pool.confirm(str(body["lease"]))
            return 200, {}
        if action == RELEASE_PATH:
            pool.release(str(body["lease"]), body.get("lost") is True)
            return 200, {}
        return 404, {"error": f"unknown action {action!r}"}
    except EnvFailure as e:
        return 503, {"error": str(e)}
    except (KeyError, TypeError, ValueError) as e:
        return 400, {"error": f"bad request: {describe(e)}"}


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)
