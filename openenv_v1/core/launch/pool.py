"""Env servers launched once and shared by many rollouts, each on its own session.

An OpenEnv server gives every WebSocket connection its own env instance, up to its
session limit, so `ServerPool` launches servers and leases them to rollouts
(`lease_book`):

- the first server (or the plan's `servers_at_start`) launches at `start()`;
- a lease handed back `rejected` (`CAPACITY_REACHED`) caps its server at the
  sessions it holds; while all are full, as many more launch as the waiting leases
  need, within `max_servers` and the host's memory (`pool_growth`);
- a lease fails only when every server stayed full, no session ending, for
  `capacity_wait_s`, or when launches fail (`pool_servers.LAUNCH_FAILURES`);
- a server a rollout lost takes no new leases: dropped at once if its process is
  gone, else after `HEALTH_PROBES` failed `/health` probes in a row during which its
  processes did not run, or `message_timeout_s` (the longest call) of failed
  probes however busy they were (a loaded host slows a server's answers; it does
  not stop its CPU).

Servers are forked from one long-lived thread (`pool_launch`); `close()` (also at
exit) stops them all.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading

from tenacity import stop_after_delay, stop_any, wait_fixed

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.env_target import EnvTarget
from openenv_v1.core.launch.lease_book import LeaseDeskBase, LeaseWait
from openenv_v1.core.launch.leases import LocalLeases
from openenv_v1.core.launch.plan import Launcher
from openenv_v1.core.launch.pool_growth import MEMORY_FLOOR_BYTES, Growth
from openenv_v1.core.launch.pool_launch import PoolState, ServerLaunches
from openenv_v1.core.launch.pool_servers import (
    LAUNCH_FAILURES,
    PooledServer,
    PoolServers,
    RunningProbe,
    answers_again,
)
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

HEALTH_PROBES = 3
"""Failed `/health` probes in a row (2 s each, a second apart), its processes idle
throughout, that drop a server a rollout could not reach."""
_PROBE_SPACING_S = 1.0


class ServerPool(LeaseDeskBase):
    """Shared env servers for one env target. Thread-safe; `close()` is idempotent."""

    def __init__(
        self,
        target: EnvTarget,
        *,
        sessions_per_server: int | None = None,
        max_servers: int | None = None,
        capacity_wait_s: float = 30.0,
    ) -> None:
        if target.base_url or not target.env:
            raise ValueError("ServerPool launches env servers: give it an `env` target")
        super().__init__(logger, "pool")
        self._target = target
        self._growth = Growth(target, max_servers)
        self._capacity_wait_s = capacity_wait_s
        self._servers = PoolServers()

        self._launches = ServerLaunches(
            target,
            sessions_per_server,
            PoolState(self._cond, self._servers, self._waiters, self._closed),
            logger,
        )
        self._started = False

    def start(self) -> None:
        """Launch the first server; returns at once (it comes up in the background)."""
        with self._cond:
            if self._started:
                return
            self._started = True
            first = self._launches.launch_locked()
            for _ in range(first.servers_at_start - 1):
                if not self._growth.may_add(len(self._servers)):
                    break
                self._launches.launch_locked()
        atexit.register(self.close)

    def _open(self) -> None:
        self.start()

    def lease(
        self, pid: int, rejected: str | None = None, unreachable: str | None = None
    ) -> tuple[str, str]:
        """A `(lease id, server URL)` with room for one more session, waiting for a
        server to start or a session to end; blocks (`lease_async` is the event
        loop's way). `rejected` and `unreachable` hand a lease back as the module
        docstring says. Raises `EnvFailure` when no server can be had."""
        if unreachable is not None:
            self._lost(unreachable)
        wait = LeaseWait()
        with self._cond:
            self._enter_locked(rejected)
            try:
                return self._waiters.block_locked(
                    lambda: self._try_lease_locked(pid, wait)
                )
            finally:
                self._waiting -= 1

    def close(self) -> None:
        """Stop serving leases and every launched server; idempotent."""
        with self._cond:
            if self._closed.is_set():
                return
            self._closed.set()
            servers = self._servers.take_all()
            self._book.clear()
            self._waiters.notify_locked()
        if self._http is not None:
            self._http.close()
        for server in servers:
            with contextlib.suppress(Exception):
                server.provider.stop()
        self._launches.shutdown()
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def servers(self) -> list[str]:
        """URLs of the servers that are up, for logs and tests."""
        with self._cond:
            return self._servers.urls_up()

    def launched(self) -> int:
        """Servers launched so far, up or starting, for logs and benchmarks."""
        with self._cond:
            return len(self._servers)

    # --- internals; `_locked` methods run with `self._cond` held ---

    def _try_lease_locked(self, pid: int, wait: LeaseWait) -> tuple[str, str] | None:
        """A lease on the least busy server with room, or None to wait; launches the
        servers the waiting leases need."""
        if self._closed.is_set():
            raise EnvFailure("the shared env server pool was closed")
        self._reap_locked()
        candidates = self._servers.with_room()
        if candidates:
            return self._book.grant(min(candidates, key=lambda s: len(s.leases)), pid)
        starting = self._servers.starting()
        if not starting and self._servers.failure is not None:
            raise EnvFailure(self._servers.failure)
        if self._servers.on_trial():
            # Sessions on trial end within a request's timeout; then the limits
            # are known and the launches below fit the demand.
            return None
        if starting or self._grow_locked():
            # A starting server's own launch timeout bounds the wait.
            wait.full_since = None
            return None
        if self._waiters.stuck_locked(wait, self._capacity_wait_s):
            raise EnvFailure(
                f"{self._target.env}: all {len(self._servers)} shared env "
                "server(s) stayed at their session limit, with no session ending, "
                f"for {self._capacity_wait_s:.0f}s "
                f"({self._growth.limit(len(self._servers))}; raise "
                f"{setting('max_servers')} or the server's session limit, or lower "
                "the eval's concurrency)"
            )
        return None

    def _grow_locked(self) -> bool:
        """Launch the servers the leases held and waited for need (`pool_growth`);
        False when none may be launched."""
        wanted = self._growth.wanted(self._servers, len(self._book) + self._waiting)
        launched = 0
        while launched < wanted and self._growth.memory_allows(self._servers):
            self._launches.launch_locked()
            launched += 1
        return launched > 0

    def _reap_locked(self) -> None:
        """Drop leases of processes that are gone and servers that died."""
        if self._book.reap():
            for server in self._servers.dead():
                self._drop_server_locked(server, "exited")

    def _lost(self, lease_id: str) -> None:
        """A rollout lost its leased server: no new leases go to it; dropped now if
        its process is gone, else probed in the background (a live-looking process
        may be hung, or a busy one just slow)."""
        with self._cond:
            lease = self._book.drop(lease_id)
            self._waiters.notify_locked()
            if lease is None or lease.server.url is None or lease.server.suspect:
                return
            server = lease.server
            if not isinstance(server, PooledServer) or server not in self._servers:
                return
            if not server.alive():
                self._drop_server_locked(server, "exited")
                return
            server.suspect = True
        threading.Thread(
            target=self._probe_suspect,
            args=(server,),
            name="openenv-v1-probe",
            daemon=True,
        ).start()

    def _probe_suspect(self, server: PooledServer) -> None:
        assert server.url is not None
        probe = RunningProbe(server)
        busy_s = self._target.message_timeout_s
        stop = stop_any(stop_after_delay(busy_s), probe.idle_for(HEALTH_PROBES))
        wait = wait_fixed(_PROBE_SPACING_S)
        if answers_again(server.url, self._closed, stop, wait, probe):
            if probe.busy_misses:
                logger.info(
                    "shared env server %s answered /health again after %d "
                    "probe(s) it was too busy for; it keeps its sessions",
                    server.url,
                    probe.busy_misses,
                )
            with self._cond:
                server.suspect = False
                self._waiters.notify_locked()
            return
        if self._closed.is_set():
            return
        if probe.idle_misses >= HEALTH_PROBES:
            why = f"failed {HEALTH_PROBES} /health probes in a row, its processes idle"
        else:
            why = f"answered no /health probe for {busy_s:.0f}s, though running"
        with self._cond:
            if server in self._servers:
                self._drop_server_locked(server, why)

    def _drop_server_locked(self, server: PooledServer, why: str) -> None:
        """Forget a broken server and its leases; killed off the lock, no grace."""
        logger.warning("shared env server %s %s; dropping it", server.url, why)
        self._servers.remove(server)
        self._book.forget_server(server)
        threading.Thread(
            target=_kill_quietly, args=(server.provider,), name="openenv-v1-stop"
        ).start()
        self._waiters.notify_locked()


def _kill_quietly(provider: Launcher) -> None:
    with contextlib.suppress(Exception):
        provider.stop(grace_s=0.0)


__all__ = [
    "HEALTH_PROBES",
    "LAUNCH_FAILURES",
    "MEMORY_FLOOR_BYTES",
    "LocalLeases",
    "ServerPool",
]
