"""Running OpenEnv servers given as a list of base URLs, leased as the pool's are.

A user who runs several servers (copies of a Space, containers of their own) gives
`base_url` as a list; `UrlPool` spreads the eval's sessions over them, and nothing is
ever launched or stopped:

- a lease goes to the server with the fewest leases among those with room (of
  several, the one leased longest ago, so even one rollout at a time spreads). A
  server's session limit is learned as the pool learns a launched one's
  (`pool_servers.ServerSeats`): a session refused with `CAPACITY_REACHED` caps it at
  the sessions it held; until then a few sessions at a time are on trial;
- a server a rollout lost (its lease handed back `unreachable`, or released `lost`:
  a refused or closed connection) is taken out at once: no lease goes to it until
  its `/health` answers again, probed in the background every `_POLL_S`, for at
  most `return_wait_s` (`RETURN_WAIT_S`); one that does not come back by then is
  given up on for the rest of the eval;
- a lease waits while every server is full or out; it fails once no session has
  ended and no server has come back for `capacity_wait_s`, naming the servers.

Leases are served through the pool's faces (`leases`): `local()` in this process
(verifiers 0.4), `serve_http()` for the eval's other processes (verifiers 0.2's
user simulators, over `local_http`); the leases of a process that is gone are
reclaimed. A process that has no desk of the eval's (a user simulator off this
host) leases from one of its own, `own_desk(urls)`.

    desk = UrlPool(["http://a:8000", "http://b:8000"])
    target = EnvTarget(base_urls=desk.urls, pool=desk.local())  # or pool_url=desk.serve_http()
    client = await open_env(target, stack)

Imports the pool's small parts only (`pool_servers`, `leases`, `local_http`); the
pool itself stays the launched servers' own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import os
import threading
import time
import uuid
from collections.abc import Sequence

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.leases import LocalLeases, answer_lease_request
from openenv_v1.core.launch.pool_servers import (
    Lease,
    LeaseWait,
    ServerSeats,
    answers_health,
)
from openenv_v1.core.launch.process_group import process_running
from openenv_v1.core.local_http import LocalEndpoint
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

RETURN_WAIT_S = 600.0
"""Seconds a server taken out is probed for before it is given up on."""
_POLL_S = (0.5, 1.0, 2.0, 5.0)
"""Spacing of the `/health` probes of a server taken out (the last one repeats)."""
_WAIT_POLL_S = 0.5
"""A waiting lease re-checks at least this often (dead leasers, time bounds)."""
_REAP_EVERY_S = 0.2


class UrlPool:
    """A lease desk for running servers given by URL; see the module docstring.
    Thread-safe; `close()` is idempotent and stops no server."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        sessions_per_server: int | None = None,
        capacity_wait_s: float = 30.0,
        return_wait_s: float = RETURN_WAIT_S,
    ) -> None:
        if not urls:
            raise ValueError("UrlPool needs at least one URL")
        self.urls = tuple(url.rstrip("/") for url in urls)
        self._servers = [
            ServerSeats(url=url, ready=True, capacity=sessions_per_server)
            for url in self.urls
        ]
        self._capacity_wait_s = capacity_wait_s
        self._return_wait_s = return_wait_s
        self._lock = threading.Lock()
        self._leases: dict[str, Lease] = {}
        self._leased_at: dict[str | None, int] = {}
        """When each server was last leased (`_lease_count`'s count): of those with
        the fewest leases, the one leased longest ago is next."""
        self._lease_count = itertools.count(1)
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = set()
        self._last_change = time.monotonic()
        """When a session last ended or a server came back."""
        self._last_reap = 0.0
        self._closed = threading.Event()
        self._http: LocalEndpoint | None = None

    def serve_http(self) -> str:
        """Serve leases to the eval's other processes; returns the endpoint's
        address (`EnvTarget.pool_url`)."""
        if self._http is None:
            self._http = LocalEndpoint(
                functools.partial(answer_lease_request, self), name="urls"
            )
            self._http.start_in_thread()
        return self._http.address

    def local(self) -> LocalLeases:
        """Leases for rollouts in this process: no socket, no thread per wait."""
        return LocalLeases(self)

    def close(self) -> None:
        """Stop serving leases (waiting ones fail) and the `/health` probes."""
        self._closed.set()
        with self._lock:
            self._notify_locked()
        if self._http is not None:
            self._http.close()

    def servers(self) -> list[str]:
        """URLs of the servers taking leases (not taken out), for logs and tests."""
        with self._lock:
            return [s.url for s in self._servers if s.url and not s.suspect]

    def capacities(self) -> dict[str, int | None]:
        """Each server's session limit, None while unknown; for logs and tests."""
        with self._lock:
            return {s.url or "": s.capacity for s in self._servers}

    def leases_held(self) -> int:
        with self._lock:
            return len(self._leases)

    async def lease_async(
        self,
        rejected: str | None = None,
        unreachable: str | None = None,
        pid: int | None = None,
    ) -> tuple[str, str]:
        """A `(lease id, server URL)` with room for one more session, waiting while
        every server is full or out. `rejected` hands back a lease whose server
        answered `CAPACITY_REACHED` (its limit is learned); `unreachable` one whose
        server could not be reached (it is taken out). `pid`: the leasing process,
        this one by default. Raises `EnvFailure` as the module docstring says."""
        loop = asyncio.get_running_loop()
        wait, pid = LeaseWait(), os.getpid() if pid is None else pid
        with self._lock:
            if rejected is not None:
                self._learn_capacity_locked(rejected)
            if unreachable is not None:
                self._take_out_locked(unreachable)
        while True:
            changed = loop.create_future()
            with self._lock:
                got = self._try_lease_locked(pid, wait)
                if got is not None:
                    return got
                self._waiters.add((loop, changed))
            try:
                await asyncio.wait([changed], timeout=_WAIT_POLL_S)
            finally:
                with self._lock:
                    self._waiters.discard((loop, changed))

    def confirm(self, lease_id: str) -> None:
        """The leased session was accepted: it counts toward its server's limit."""
        with self._lock:
            lease = self._leases.get(lease_id)
            if lease is not None and lease.server.confirm(lease_id):
                self._notify_locked()

    def release(self, lease_id: str, lost: bool = False) -> None:
        """The rollout is done with its session; `lost`: its server failed it (a
        refused or closed connection), which takes that server out."""
        with self._lock:
            if lost:
                self._take_out_locked(lease_id)
            elif self._drop_lease_locked(lease_id) is not None:
                self._last_change = time.monotonic()
                self._notify_locked()

    # --- internals; `_locked` methods run with `self._lock` held ---

    def _try_lease_locked(self, pid: int, wait: LeaseWait) -> tuple[str, str] | None:
        if self._closed.is_set():
            raise EnvFailure("the base_url servers' lease desk was closed")
        self._reap_locked()
        candidates = [s for s in self._servers if s.has_room()]
        if candidates:
            server = min(
                candidates, key=lambda s: (len(s.leases), self._leased_at.get(s.url, 0))
            )
            self._leased_at[server.url] = next(self._lease_count)
            lease_id = uuid.uuid4().hex
            server.leases.add(lease_id)
            self._leases[lease_id] = Lease(server, pid)
            assert server.url is not None
            return lease_id, server.url
        if any(s.settling() or s.capacity is None for s in self._in_locked()):
            # Sessions on trial end within one request's timeout.
            wait.full_since = None
            return None
        now = time.monotonic()
        wait.full_since = wait.full_since or now
        if now - max(wait.full_since, self._last_change) >= self._capacity_wait_s:
            raise EnvFailure(self._stuck_message_locked())
        return None

    def _in_locked(self) -> list[ServerSeats]:
        return [s for s in self._servers if s.ready and not s.suspect]

    def _stuck_message_locked(self) -> str:
        wait = f"{self._capacity_wait_s:g}s"
        urls = setting("base_url")
        if not self._in_locked():
            return (
                f"no server of {urls} ({', '.join(self.urls)}) could be reached, and none came back "
                f"within {wait}: start them, or correct the URLs in {urls}"
            )
        held = ", ".join(f"{s.url} {len(s.leases)}" for s in self._in_locked())
        return (
            f"every server of {urls} stayed at its session limit (sessions held: "
            f"{held}), with no session ending, for {wait}: add servers to {urls}, "
            "raise their session limit, or lower the eval's concurrency"
        )

    def _drop_lease_locked(self, lease_id: str) -> Lease | None:
        lease = self._leases.pop(lease_id, None)
        if lease is not None:
            lease.server.leases.discard(lease_id)
            lease.server.confirmed.discard(lease_id)
        return lease

    def _learn_capacity_locked(self, lease_id: str) -> None:
        lease = self._drop_lease_locked(lease_id)
        if lease is None:
            return
        if (limit := lease.server.learn_capacity()) is not None:
            logger.info(
                "env server %s holds at most %d sessions", lease.server.url, limit
            )
        self._notify_locked()

    def _take_out_locked(self, lease_id: str) -> None:
        """A rollout lost the server of `lease_id`: no lease goes to it until its
        `/health` answers (probed on a thread of its own)."""
        lease = self._drop_lease_locked(lease_id)
        self._notify_locked()
        if lease is None or lease.server.suspect or not lease.server.ready:
            return
        lease.server.suspect = True
        logger.warning(
            "env server %s could not be reached; no sessions go to it until its "
            "/health answers",
            lease.server.url,
        )
        threading.Thread(
            target=self._await_return,
            args=(lease.server,),
            name="openenv-v1-url-probe",
            daemon=True,
        ).start()

    def _await_return(self, server: ServerSeats) -> None:
        """Probe `server`'s `/health` until it answers (it takes leases again), the
        desk closes, or `return_wait_s` pass (it is given up on)."""
        assert server.url is not None
        deadline = time.monotonic() + self._return_wait_s
        for attempt in itertools.count():
            if answers_health(server.url):
                with self._lock:
                    server.suspect = False
                    self._last_change = time.monotonic()
                    self._notify_locked()
                logger.info(
                    "env server %s answers again; it takes sessions", server.url
                )
                return
            pause = _POLL_S[min(attempt, len(_POLL_S) - 1)]
            if time.monotonic() + pause > deadline or self._closed.wait(pause):
                break
        if not self._closed.is_set():
            with self._lock:
                server.ready = False
            logger.warning(
                "env server %s did not come back within %.0fs; no sessions go to it "
                "in this eval",
                server.url,
                self._return_wait_s,
            )

    def _reap_locked(self) -> None:
        """Drop the leases of processes that are gone (at most every
        `_REAP_EVERY_S`)."""
        now = time.monotonic()
        if now - self._last_reap < _REAP_EVERY_S:
            return
        self._last_reap = now
        own = os.getpid()
        for lease_id, lease in list(self._leases.items()):
            if lease.pid != own and not process_running(lease.pid):
                self._drop_lease_locked(lease_id)

    def _notify_locked(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for loop, changed in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_complete, changed)


_OWN_DESKS: dict[tuple[str, ...], UrlPool] = {}
_OWN_DESKS_LOCK = threading.Lock()


def own_desk(urls: Sequence[str]) -> UrlPool:
    """This process's own desk for `urls`, made once: for a process that has no
    desk of the eval's to lease from (a user simulator off this host)."""
    key = tuple(urls)
    with _OWN_DESKS_LOCK:
        desk = _OWN_DESKS.get(key)
        if desk is None:
            desk = _OWN_DESKS[key] = UrlPool(key)
        return desk


def _complete(changed: asyncio.Future) -> None:
    if not changed.done():
        changed.set_result(None)


__all__ = ["RETURN_WAIT_S", "UrlPool", "own_desk"]
