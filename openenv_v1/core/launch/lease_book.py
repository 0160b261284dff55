"""A lease desk's leases, the requests waiting for room, and the lease calls, for
both desks (`pool.ServerPool`, `url_pool.UrlPool`).

`LeaseBook` holds each lease by id, with its server (`pool_servers.ServerSeats`) and
the leasing process: granted, confirmed, handed back, handed back refused
(`CAPACITY_REACHED`: the server's limit is learned), or reclaimed once that process
is gone. `LeaseWaiters` holds the requests that found no room: threads on the desk's
condition, coroutines on a future of their own loop (no thread held), all woken when
a session ends or a server comes up or back. `LeaseDeskBase` answers the lease calls
with them under the desk's one lock; a desk says where a lease may go
(`_try_lease_locked`) and what becomes of a server a rollout lost (`_lost`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio

from openenv_v1.core.launch.leases import (
    LocalLeases,
    ServerContracts,
    answer_lease_request,
)
from openenv_v1.core.launch.process_group import process_running
from openenv_v1.core.local_http import LocalEndpoint

if TYPE_CHECKING:
    from openenv_v1.core.launch.pool_servers import ServerSeats

WAIT_POLL_S = 0.5
"""The first waiting lease re-checks at least this often (dead leasers and servers,
time)."""
QUEUE_POLL_S = 2.0
"""Every other waiting lease re-checks at least this often."""
_REAP_EVERY_S = 0.2

_T = TypeVar("_T")


@dataclass(frozen=True)
class Lease:
    server: ServerSeats
    pid: int
    """The leasing process: its leases are reclaimed once it is gone."""


@dataclass
class LeaseWait:
    """One lease request's view of how long every server has been full."""

    full_since: float | None = None


class LeaseBook:
    """The leases a desk has handed out, by id; `log` is the desk's logger."""

    def __init__(self, log: logging.Logger) -> None:
        self._leases: dict[str, Lease] = {}
        self._others: dict[int, set[str]] = {}
        """The leases of other processes (0.2's user simulators), by pid: the only
        ones `reap` looks at."""
        self._log = log
        self._last_reap = 0.0

    def __len__(self) -> int:
        return len(self._leases)

    def grant(self, server: ServerSeats, pid: int) -> tuple[str, str]:
        """A new lease on `server` for process `pid`: `(lease id, server URL)`."""
        lease_id = uuid.uuid4().hex
        server.leases.add(lease_id)
        self._leases[lease_id] = Lease(server, pid)
        if pid != os.getpid():
            self._others.setdefault(pid, set()).add(lease_id)
        assert server.url is not None
        return lease_id, server.url

    def confirm(self, lease_id: str) -> bool:
        """The leased session was accepted; whether waiting leases may find room."""
        lease = self._leases.get(lease_id)
        return lease is not None and lease.server.confirm(lease_id)

    def url(self, lease_id: str) -> str | None:
        """The URL of the server of `lease_id`; None if the lease is unknown."""
        lease = self._leases.get(lease_id)
        return lease.server.url if lease is not None else None

    def drop(self, lease_id: str) -> Lease | None:
        """Forget a lease (handed back, or its server lost); None if unknown."""
        lease = self._leases.pop(lease_id, None)
        if lease is not None:
            lease.server.leases.discard(lease_id)
            lease.server.confirmed.discard(lease_id)
            self._forget_other(lease, lease_id)
        return lease

    def _forget_other(self, lease: Lease, lease_id: str) -> None:
        if (others := self._others.get(lease.pid)) is not None:
            others.discard(lease_id)
            if not others:
                del self._others[lease.pid]

    def refused(self, lease_id: str) -> bool:
        """The lease's server answered `CAPACITY_REACHED`: drop the lease and cap the
        server at the sessions it accepted; whether the lease was held."""
        lease = self.drop(lease_id)
        if lease is None:
            return False
        if (limit := lease.server.learn_capacity()) is not None:
            self._log.info(
                "env server %s holds at most %d sessions", lease.server.url, limit
            )
        return True

    def reap(self) -> bool:
        """Drop gone processes' leases, at most every `_REAP_EVERY_S`; if it looked."""
        now = time.monotonic()
        if now - self._last_reap < _REAP_EVERY_S:
            return False
        self._last_reap = now
        for pid in [pid for pid in self._others if not process_running(pid)]:
            for lease_id in list(self._others.get(pid, ())):
                self.drop(lease_id)
        return True

    def forget_server(self, server: ServerSeats) -> None:
        """`server` is gone: forget its leases with it."""
        for lease_id in server.leases:
            if (lease := self._leases.pop(lease_id, None)) is not None:
                self._forget_other(lease, lease_id)
        server.leases.clear()
        server.confirmed.clear()

    def clear(self) -> None:
        self._leases.clear()
        self._others.clear()


class LeaseWaiters:
    """The lease requests waiting for room on a desk whose lock is `cond` (held
    around every call but `until`, which takes it for each try).

    Coroutines wait in arrival order, each on a future of its own: a session ending
    wakes the one that has waited longest (one seat, one lease), anything else that
    makes room wakes them all, and a woken one that leaves without trying again
    passes its turn on. The first in line also re-checks every `WAIT_POLL_S`, the
    rest every `QUEUE_POLL_S` (dead leasers, the desk's deadline): with thousands in
    flight, waking or polling every waiter for every seat cost O(waiters) per seat.
    """

    def __init__(self, cond: threading.Condition) -> None:
        self._cond = cond
        self._queue: dict[asyncio.Future[None], asyncio.AbstractEventLoop] = {}
        self._last_progress = time.monotonic()

    def notify_locked(self, room: int | None = None) -> None:
        """Wake the threads and the `room` longest-waiting coroutines (None: all)."""
        self._cond.notify_all()
        self._wake_locked(len(self._queue) if room is None else room)

    def progress_locked(self) -> None:
        """A server came back: `stuck_locked` waits start over; wakes every lease."""
        self._last_progress = time.monotonic()
        self.notify_locked()

    def seat_freed_locked(self) -> None:
        """A session ended: `stuck_locked` waits start over; the longest-waiting
        lease wakes (a thread, and a coroutine)."""
        self._last_progress = time.monotonic()
        self._cond.notify()
        self._wake_locked(1)

    def stuck_locked(self, wait: LeaseWait, limit_s: float) -> bool:
        """Whether every server has been full, with no progress, for `limit_s`."""
        now = time.monotonic()
        wait.full_since = wait.full_since or now
        return now - max(wait.full_since, self._last_progress) >= limit_s

    def block_locked(self, attempt: Callable[[], _T | None]) -> _T:
        """`attempt()` until it gives something, waiting on the (held) condition."""
        while (got := attempt()) is None:
            self._cond.wait(WAIT_POLL_S)
        return got

    async def until(self, attempt: Callable[[], _T | None]) -> _T:
        """`attempt()` (under the condition) until it gives something, awaiting its
        turn in line between tries."""
        loop = asyncio.get_running_loop()
        while True:
            changed = loop.create_future()
            with self._cond:
                got = attempt()
                if got is not None:
                    return got
                poll_s = QUEUE_POLL_S if self._queue else WAIT_POLL_S
                self._queue[changed] = loop
            timer = loop.call_later(poll_s, _complete, changed)
            woken = False
            try:
                await changed
                woken = True
            finally:
                timer.cancel()
                with self._cond:
                    if self._queue.pop(changed, None) is None and not woken:
                        self._wake_locked(1)  # woken, then cancelled: pass it on

    def _wake_locked(self, count: int) -> None:
        """Complete the futures of the `count` coroutines first in line."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        while count > 0 and self._queue:
            changed, loop = next(iter(self._queue.items()))
            del self._queue[changed]
            count -= 1
            if loop is running:
                loop.call_soon(_complete, changed)
                continue
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_complete, changed)


class LeaseDeskBase(ABC):
    """The lease calls of a desk (`leases.LeaseDesk`) under its one lock, `_cond`."""

    def __init__(self, log: logging.Logger, name: str) -> None:
        self._cond = threading.Condition()
        self._closed = threading.Event()
        self._http: LocalEndpoint | None = None
        self._endpoint_name = name
        self._book = LeaseBook(log)
        self._waiters = LeaseWaiters(self._cond)
        self._waiting = 0  # lease requests waiting for room
        self.contracts = ServerContracts()
        """What this process's episodes learned of each server's contract
        (`leases.ServerContracts`); a server released as lost is forgotten."""

    def serve_http(self) -> str:
        """Serve leases to the eval's other processes (`local_http`); returns the
        endpoint's address, `EnvTarget.pool_url`."""
        self._open()
        if self._http is None:
            self._http = LocalEndpoint(
                functools.partial(answer_lease_request, self), name=self._endpoint_name
            )
            self._http.start_in_thread()
        return self._http.address

    def local(self) -> LocalLeases:
        """Leases for rollouts in this process: no socket, no thread per wait."""
        self._open()
        return LocalLeases(self)

    def _open(self) -> None:
        """Before a lease face opens (a `ServerPool` launches its first server)."""
        return None

    async def lease_async(
        self,
        rejected: str | None = None,
        unreachable: str | None = None,
        pid: int | None = None,
    ) -> tuple[str, str]:
        """A `(lease id, server URL)` with room for one more session, waiting with no
        thread held. `rejected` hands back a lease whose server answered
        `CAPACITY_REACHED`; `unreachable` one whose server could not be reached.
        `pid`: the leasing process (this one). `EnvFailure` when the desk gives up."""
        if unreachable is not None:
            await anyio.to_thread.run_sync(self._lost, unreachable)
        wait, pid = LeaseWait(), os.getpid() if pid is None else pid
        with self._cond:
            self._enter_locked(rejected)
        try:
            return await self._waiters.until(lambda: self._try_lease_locked(pid, wait))
        finally:
            with self._cond:
                self._waiting -= 1

    def confirm(self, lease_id: str) -> None:
        """The leased session was accepted (a limit learned too low is raised)."""
        with self._cond:
            if self._book.confirm(lease_id):
                # One more session accepted: one trial seat, or a limit one higher.
                self._waiters.notify_locked(1)

    def release(self, lease_id: str, lost: bool = False) -> None:
        """The rollout is done with its session; `lost`: its server failed it (its
        contract is forgotten)."""
        if lost:
            with self._cond:
                url = self._book.url(lease_id)
            if url is not None:
                self.contracts.forget(url)
            self._lost(lease_id)
            return
        with self._cond:
            if self._book.drop(lease_id) is not None:
                self._waiters.seat_freed_locked()

    def leases_held(self) -> int:
        """Leases not yet handed back, for logs and tests."""
        with self._cond:
            return len(self._book)

    def _enter_locked(self, rejected: str | None) -> None:
        """A lease request begins to wait: hand back its `rejected` lease, count it."""
        if rejected is not None and self._book.refused(rejected):
            self._waiters.notify_locked()
        self._waiting += 1

    @abstractmethod
    def _try_lease_locked(self, pid: int, wait: LeaseWait) -> tuple[str, str] | None:
        """A lease for process `pid` (`LeaseBook.grant`), or None to wait; raises
        `EnvFailure` to give up. Runs with `_cond` held."""

    @abstractmethod
    def _lost(self, lease_id: str) -> None:
        """A rollout could not reach the server of `lease_id`: drop the lease, decide
        what becomes of the server. Runs off the lock."""


def _complete(changed: asyncio.Future) -> None:
    if not changed.done():
        changed.set_result(None)


__all__ = [
    "QUEUE_POLL_S",
    "WAIT_POLL_S",
    "Lease",
    "LeaseBook",
    "LeaseDeskBase",
    "LeaseWait",
    "LeaseWaiters",
]
