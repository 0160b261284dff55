"""How a `ServerPool`'s servers are launched, and how each launch ends.

Servers are forked from one long-lived thread, which their parent-death signal is
tied to: a pool's process killed outright still takes them with it. Each launch then
waits for `/health` on a thread of its own and records, under the pool's lock, that
it came up, failed (`PoolServers.launch_failed`: the waiting leases' failure, or the
server's own loss), or was cancelled by the pool's close; the waiting leases wake.

Servers whose start runs on this host's CPU (a launcher's `starts_here`: UV, which
imports the env's app, 1.5-2.5 s of CPU each) start `STARTS_AT_ONCE` at a time, the
rest of a wave queued: 31 started at once on 2 cores took the CPU from the eval for
the whole wave (each process its equal share), and none was up before all were.

What the launches share (`PoolShared`: UV's template processes, which its servers
fork from, `uvicorn_forks`) is made on the owner thread too, and closed with the pool.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.env_target import EnvTarget
from openenv_v1.core.launch.lease_book import LeaseWaiters
from openenv_v1.core.launch.plan import (
    LaunchPlan,
    PoolShared,
    SharesWithPool,
    launch_failure,
    launch_plan,
)
from openenv_v1.core.launch.pool_servers import (
    PROBE_WINDOW,
    PooledServer,
    PoolServers,
    group_rss,
)

STARTS_AT_ONCE = max(2, os.cpu_count() or 2)
"""Servers of a pool starting at once on this host's CPU (the module docstring)."""
_SLOT_POLL_S = 0.2


@dataclass(frozen=True)
class PoolState:
    """What a launch changes of its pool's."""

    cond: threading.Condition
    servers: PoolServers
    waiters: LeaseWaiters
    closed: threading.Event


class ServerLaunches:
    """The launches of one pool's servers, each taking `sessions_per_server`."""

    def __init__(
        self,
        target: EnvTarget,
        sessions_per_server: int | None,
        pool: PoolState,
        log: logging.Logger,
    ) -> None:
        self._target = target
        self._sessions_per_server = sessions_per_server
        self._pool = pool
        self._log = log
        self._owner = ThreadPoolExecutor(1, thread_name_prefix="openenv-v1-launcher")
        self._start_slots = threading.Semaphore(STARTS_AT_ONCE)
        self._shared = PoolShared()

    def launch_locked(self) -> LaunchPlan:
        """Launch one more server in the background (lock held); returns its plan."""
        plan = launch_plan(self._target)
        plan.launcher.run_on_owner = self._on_owner
        if isinstance(plan.launcher, SharesWithPool):
            plan.launcher.pool_shared = self._shared
        server = PooledServer(
            provider=plan.launcher, capacity=self._sessions_per_server
        )
        self._pool.servers.add(server)
        threading.Thread(
            target=self._bring_up,
            args=(server, plan.start_args),
            name="openenv-v1-ready",
            daemon=True,
        ).start()
        return plan

    def shutdown(self) -> None:
        """End what the launches share and let the owner thread go (the pool
        closed; its servers are stopped)."""
        self._shared.close()
        self._owner.shutdown(wait=False)

    def _bring_up(self, server: PooledServer, start_args: Mapping[str, Any]) -> None:
        """Once it has a start slot (if it starts here), the server's launch: up or
        failed, recorded before the slot goes to the next."""
        here = getattr(server.provider, "starts_here", False)
        if here and not self._take_start_slot():
            self._failed(server, EnvFailure("the pool closed before it started"))
            return
        try:
            self._launch(server, start_args)
        finally:
            if here:
                self._start_slots.release()

    def _launch(self, server: PooledServer, start_args: Mapping[str, Any]) -> None:
        """Fork the server from the owner thread, then wait for `/health` here."""
        try:
            self._on_owner(lambda: server.provider.start(**start_args))
            url = server.provider.wait_for_ready()
        except Exception as e:
            self._failed(server, e)
            return
        rss = group_rss(server.provider)
        with self._pool.cond:
            self._pool.servers.came_up(server, url, rss)
            # Its room: its limit, or the sessions it takes on trial while unknown.
            self._pool.waiters.notify_locked(server.capacity or PROBE_WINDOW)
        choice = server.provider.app_choice
        self._log.info(
            "shared env server for %s up at %s, serving app %s (%s)",
            self._target.env,
            url,
            choice.app if choice else "?",
            choice.source if choice else "?",
        )

    def _take_start_slot(self) -> bool:
        """Wait for one of the `STARTS_AT_ONCE` start slots; False if the pool
        closed first."""
        while not self._start_slots.acquire(timeout=_SLOT_POLL_S):
            if self._pool.closed.is_set():
                return False
        if self._pool.closed.is_set():
            self._start_slots.release()
            return False
        return True

    def _failed(self, server: PooledServer, error: Exception) -> None:
        """`server` did not come up: stop what it started, record why, say so."""
        with contextlib.suppress(Exception):
            server.provider.stop()
        failure = str(launch_failure(self._target, error))
        with self._pool.cond:
            closed = self._pool.closed.is_set()
            lost = self._pool.servers.launch_failed(server, failure, closed)
            self._pool.waiters.notify_locked()
        if closed:
            self._log.info("launch of %s cancelled: the pool closed", self._target.env)
        elif lost:
            # Others came up from the same plan: the waiting leases replace it.
            self._log.warning("a shared env server was lost starting: %s", failure)
        else:
            self._log.error("%s", failure)

    def _on_owner(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the launcher thread, which launched servers die with."""
        return self._owner.submit(fn).result()


__all__ = ["STARTS_AT_ONCE", "PoolState", "ServerLaunches"]
