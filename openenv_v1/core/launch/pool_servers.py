"""A `ServerPool`'s record of each server it launched, and what it reads about one.

`ServerSeats` is what any lease desk knows of a server (the pool's, and
`url_pool.UrlPool`'s of servers given by URL): its URL, the sessions it holds and has
accepted, its learned session limit, and whether a rollout could not reach it
(`suspect`). `PooledServer` is one launched server as the pool sees it: those, its
provider and its memory when it came up. The pool changes
these under its own lock; nothing here locks. Beside it, what the pool reads about
the host and a server: available memory (`available_memory`), a server's process
group's memory (`group_rss`), one `/health` probe (`answers_health`).

Imports `process_group` (the one `/proc` reader), and `plan.Launcher` for its type only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

# `available_memory` is the one `/proc` reader's, named here for the pool.
from openenv_v1.core.launch.process_group import available_memory as available_memory
from openenv_v1.core.launch.process_group import proc_stats

if TYPE_CHECKING:
    from openenv_v1.core.launch.plan import Launcher

PROBE_WINDOW = 16
"""Sessions on trial at once on a server whose session limit is not yet known."""


@dataclass(eq=False, kw_only=True)
class ServerSeats:
    """The sessions one server holds as a lease desk sees them: a launched server of
    the pool (`PooledServer`), or a running one given by URL (`url_pool`)."""

    url: str | None = None
    ready: bool = False
    capacity: int | None = None
    """Sessions it accepts at once; None until configured or learned."""
    leases: set[str] = field(default_factory=set)
    confirmed: set[str] = field(default_factory=set)
    """Leases whose session the server accepted (a first request answered)."""
    suspect: bool = False
    """A rollout could not reach it: no new leases while `/health` is probed."""

    def has_room(self) -> bool:
        if not self.ready or self.suspect:
            return False
        if self.capacity is None:
            # Unknown limit: a few sessions on trial at a time, so a burst does not
            # pile hundreds of doomed connections onto a server that takes one.
            return len(self.leases) - len(self.confirmed) < PROBE_WINDOW
        return len(self.leases) < self.capacity

    def settling(self) -> bool:
        """Full on paper, but some sessions are not yet accepted or refused: its
        limit may still turn out higher (refusals lower it to what it accepted)."""
        return (
            self.capacity is not None
            and len(self.leases) >= self.capacity
            and len(self.confirmed) < len(self.leases)
        )

    def learn_capacity(self) -> int | None:
        """A session it was leased for was refused (`CAPACITY_REACHED`): its limit is
        what it accepted (at least one). The new limit, or None if it was no lower."""
        limit = max(1, len(self.confirmed))
        if self.capacity is None or limit < self.capacity:
            self.capacity = limit
            return limit
        return None

    def confirm(self, lease_id: str) -> bool:
        """The session of `lease_id` was accepted: it counts toward what the server
        holds (a limit learned too low is raised to it). Whether waiting leases may
        find room now (a trial slot opened, or a settling server settled a bit)."""
        news = self.capacity is None or self.settling()
        self.confirmed.add(lease_id)
        if self.capacity is not None and len(self.confirmed) > self.capacity:
            self.capacity = len(self.confirmed)
        return news


@dataclass(eq=False, kw_only=True)
class PooledServer(ServerSeats):
    """A server the pool launched: its provider, and its memory when it came up."""

    provider: Launcher
    rss: int = 0
    """Resident memory of its process group when it came up, in bytes."""

    def alive(self) -> bool:
        return self.provider.running()


@dataclass(frozen=True)
class Lease:
    server: ServerSeats
    pid: int
    """The leasing process: its leases are reclaimed once it is gone."""


@dataclass
class LeaseWait:
    """One lease request's view of how long every server has been full."""

    full_since: float | None = None


def group_rss(provider: Launcher) -> int:
    """Resident memory of a server's process group (it is its own session leader),
    in bytes; 0 when unknown."""
    pid = getattr(provider, "pid", None)
    if not pid:
        return 0
    pages = sum(stat.rss_pages for stat in proc_stats() if stat.pgrp == pid)
    return pages * os.sysconf("SC_PAGE_SIZE")


def answers_health(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the server at `url` answers `/health` with 200 within `timeout_s`."""
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as http:
            return http.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False
