"""What a lease desk knows of each server (`ServerSeats`), and a `ServerPool`'s
record of the servers it launched (`PooledServer`, `PoolServers`: what their
launches said). The desk changes these under its own lock; nothing here locks.
Beside them, what the pool reads of a server: its memory (`group_rss`), one
`/health` probe (`answers_health`), and whether its processes ran while it went
unanswered (`RunningProbe`: busy, not dead).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from tenacity import Retrying, retry_if_result, stop_any, stop_when_event_set

from openenv_v1.core.http_client import shared_tls
from openenv_v1.core.launch.process_group import ProcStat, proc_stats

if TYPE_CHECKING:
    from openenv_v1.core.launch.plan import Launcher

PROBE_WINDOW = 16
"""Sessions on trial at once on a server whose session limit is not yet known."""
LAUNCH_FAILURES = 3
"""Failed launches in a row (none up in between), once a server of the pool has come
up, that fail the waiting leases as a failed first launch does."""


@dataclass(eq=False, kw_only=True)
class ServerSeats:
    """The sessions one server holds, as a lease desk sees them."""

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
            # A few sessions on trial at a time: a burst must not pile hundreds of
            # doomed connections onto a server that takes one.
            return len(self.leases) - len(self.confirmed) < PROBE_WINDOW
        return len(self.leases) < self.capacity

    def settling(self) -> bool:
        """Full on paper, but some sessions are not yet accepted or refused."""
        return (
            self.capacity is not None
            and len(self.leases) >= self.capacity
            and len(self.confirmed) < len(self.leases)
        )

    def learn_capacity(self) -> int | None:
        """A session was refused: its limit is what it accepted (at least one). The
        new limit, or None if it was no lower."""
        limit = max(1, len(self.confirmed))
        if self.capacity is None or limit < self.capacity:
            self.capacity = limit
            return limit
        return None

    def confirm(self, lease_id: str) -> bool:
        """The session of `lease_id` was accepted (a limit learned too low is raised);
        whether waiting leases may find room now."""
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

    def cpu_ticks(self) -> int | None:
        """CPU time its process group has used, in clock ticks; None when unknown
        (no process of this host)."""
        group = _group_stats(self.provider)
        return None if group is None else sum(stat.cpu_ticks for stat in group)


class PoolServers:
    """The servers of one pool, up or starting, and what their launches said."""

    def __init__(self) -> None:
        self._servers: list[PooledServer] = []
        self.failure: str | None = None
        """A failed launch's diagnosis, which waiting leases fail with."""
        self._ever_up = False
        self._failed_launches = 0  # in a row, since one last came up
        self.capacity_seen = 0
        """The largest session limit of a server dropped (what a pool whose servers
        were all lost grows at)."""

    def __len__(self) -> int:
        return len(self._servers)

    def __iter__(self) -> Iterator[PooledServer]:
        return iter(self._servers)

    def __contains__(self, server: object) -> bool:
        return server in self._servers

    def add(self, server: PooledServer) -> None:
        self._servers.append(server)

    def take_all(self) -> list[PooledServer]:
        """Every server, forgotten here (the pool closes)."""
        servers, self._servers = self._servers, []
        return servers

    def came_up(self, server: PooledServer, url: str, rss: int) -> None:
        """`server` answered at `url`: it takes leases; failures are forgiven."""
        server.url, server.ready, server.rss = url, True, rss
        self._ever_up, self._failed_launches, self.failure = True, 0, None

    def launch_failed(self, server: PooledServer, failure: str, closed: bool) -> bool:
        """`server` did not come up and is forgotten. Whether that is its own loss (a
        server came up before, and fewer than `LAUNCH_FAILURES` failed in a row);
        else, unless `closed`, `failure` fails waiting leases."""
        if server in self._servers:
            self._servers.remove(server)
        self._failed_launches += 1
        lost = self._ever_up and self._failed_launches < LAUNCH_FAILURES
        if not closed and not lost:
            self.failure = failure
        return lost

    def remove(self, server: PooledServer) -> None:
        """Forget a broken server, keeping the sessions it held (`capacity_seen`)."""
        self._servers.remove(server)
        held = server.capacity or len(server.confirmed)
        self.capacity_seen = max(self.capacity_seen, held)

    def with_room(self) -> list[PooledServer]:
        return [s for s in self._servers if s.has_room()]

    def starting(self) -> bool:
        """Whether a server is starting or being probed: a verdict is coming."""
        return any(not s.ready or s.suspect for s in self._servers)

    def on_trial(self) -> bool:
        """Whether sessions are on trial (an unknown or `settling` limit)."""
        return any(s.settling() or s.capacity is None for s in self._servers)

    def dead(self) -> list[PooledServer]:
        """The servers that came up and whose process is gone."""
        return [s for s in self._servers if s.ready and not s.alive()]

    def urls_up(self) -> list[str]:
        return [s.url for s in self._servers if s.ready and s.url]

    def per_server(self) -> int:
        """Sessions a new server should hold: the largest limit known (0: none)."""
        return max(
            (s.capacity for s in self._servers if s.capacity is not None),
            default=self.capacity_seen,
        )


def _group_stats(provider: Launcher) -> list[ProcStat] | None:
    """The processes of a server's process group (it is its own session leader);
    None when it has no process of this host."""
    pid = getattr(provider, "pid", None)
    if not pid:
        return None
    return [stat for stat in proc_stats() if stat.pgrp == pid]


def group_rss(provider: Launcher) -> int:
    """Resident memory of a server's process group, in bytes; 0 when unknown."""
    group = _group_stats(provider)
    pages = 0 if group is None else sum(stat.rss_pages for stat in group)
    return pages * os.sysconf("SC_PAGE_SIZE")


def answers_again(
    url: str,
    closed: threading.Event,
    stop: Any,
    wait: Any,
    probe: Callable[[str], bool] | None = None,
) -> bool:
    """Whether the server at `url` answers `/health` again, probed (`probe`, else
    `answers_health`) with tenacity's `wait` between tries until `stop` (or
    `closed`)."""
    return Retrying(
        stop=stop_any(stop, stop_when_event_set(closed)),
        wait=wait,
        retry=retry_if_result(lambda answered: not answered),
        sleep=closed.wait,
        retry_error_callback=lambda _: False,
    )(probe or answers_health, url)


class RunningProbe:
    """`/health` probes of a launched server that tell busy from dead: a probe
    unanswered while the server's processes used no CPU (stopped, hung, deadlocked)
    is an idle miss; one unanswered while they ran (a loaded host, a burst of
    sessions) is not. Where its CPU time cannot be read, every miss is idle."""

    def __init__(self, server: PooledServer) -> None:
        self._server = server
        self.idle_misses = 0
        """Probes unanswered in a row while the server did not run."""
        self.busy_misses = 0

    def __call__(self, url: str) -> bool:
        before = self._server.cpu_ticks()
        if answers_health(url):
            return True
        after = self._server.cpu_ticks()
        if before is not None and after is not None and after > before:
            self.idle_misses = 0
            self.busy_misses += 1
        else:
            self.idle_misses += 1
        return False

    def idle_for(self, probes: int) -> Callable[[Any], bool]:
        """A tenacity stop: `probes` idle misses in a row."""
        return lambda _: self.idle_misses >= probes


def answers_health(url: str, timeout_s: float = 2.0) -> bool:
    """Whether the server at `url` answers `/health` with 200 within `timeout_s`."""
    try:
        with httpx.Client(
            timeout=timeout_s, trust_env=False, verify=shared_tls()
        ) as http:
            return http.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False
