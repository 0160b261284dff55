"""Env servers launched once and shared by many rollouts, each on its own session.

An OpenEnv server gives every WebSocket connection its own environment instance, up to
its session limit. So one launched server can serve many rollouts at once, instead of
each rollout paying for its own `uv run ... uvicorn` start. `ServerPool` lives in the
process that builds the taskset (the eval, or one env-server worker):

- it launches the first server as soon as it is started, so the start-up overlaps
  the framework's own (or as many as the launcher's `servers_at_start` says: a Swarm
  service's tasks in host mode, each a server);
- rollouts lease a server (`leases`): in the pool's own process through `local()`
  (verifiers 0.4, where every episode runs in the eval or env-server process), or
  from other processes over a small local HTTP endpoint (`serve_http()`; verifiers
  0.2's user simulators): a unix socket in a 0700 directory with a token, JSON only,
  bounded connections (`local_http.LocalEndpoint`), where waiting leases hold no
  thread. A lease names the server URL and is returned when the
  rollout ends, or reclaimed when the leasing process is gone;
- the session limit is learned: a rollout refused with `CAPACITY_REACHED` hands its
  lease back as `rejected`, which caps that server at the sessions it already holds;
  while every server is full, as many more are launched at once as the waiting
  leases need (up to `max_servers`, if set, and while the host keeps memory for
  one more: `MEMORY_FLOOR_BYTES`, or twice the largest server's, is left free);
- a lease waits while servers start or sessions end; it fails only when every
  server stayed full, with no session ending, for `capacity_wait_s`;
- a failed first launch (wrong `app`, missing dependency) fails every waiting lease
  at once with the launcher's diagnosis. Once a server of the pool has come up, a
  launch that fails is that server's loss (killed while it started): it is dropped
  and replaced, and only `LAUNCH_FAILURES` failed launches in a row, none up in
  between, fail the waiting leases. A server that dies later is dropped and replaced;
- a server is taken out at its first failure: one a rollout lost (its lease handed
  back as `unreachable`, or released as `lost`: a refused or closed connection) gets
  no new leases from that moment. It is dropped at once if its process is gone;
  else its `/health` is probed, and it is dropped (with its other sessions) only when
  `HEALTH_PROBES` probes in a row fail; one that answers takes leases again.

Servers are forked from one long-lived thread, which is what their parent-death signal
is tied to: if this process is killed outright, they still get SIGTERM. `close()` (also
run at exit) stops them all.

The pool's record of each server is `pool_servers`'; both ends of a lease (in
process, and the endpoint's requests and client) are `leases`'. Over ~500 lines: `ServerPool` is one state
machine under one lock (leases, launches, growth and the health of its servers all
read and change the same records and wake the same waiters), so it stays one class.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio

from openenv_v1.core.errors import EnvFailure, redact
from openenv_v1.core.launch.env_target import EnvTarget
from openenv_v1.core.launch.leases import LocalLeases, answer_lease_request
from openenv_v1.core.launch.plan import (
    Launcher,
    LaunchPlan,
    launch_failure,
    launch_plan,
)
from openenv_v1.core.launch.pool_servers import (
    Lease,
    LeaseWait,
    PooledServer,
    answers_health,
    available_memory,
    group_rss,
)
from openenv_v1.core.launch.process_group import process_running
from openenv_v1.core.local_http import LocalEndpoint
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

MEMORY_FLOOR_BYTES = 1 << 30
"""Memory left free on the host when no `max_servers` bounds the launches."""
_WAIT_POLL_S = 0.5
"""A waiting lease re-checks at least this often (dead leasers, dead servers)."""
_REAP_EVERY_S = 0.2
LAUNCH_FAILURES = 3
"""Failed launches in a row (none up in between), once a server of the pool has come
up, that fail the waiting leases as a failed first launch does."""
HEALTH_PROBES = 3
"""Failed `/health` probes in a row (2 s each, a second apart) that drop a server a
rollout could not reach."""
_PROBE_SPACING_S = 1.0


class ServerPool:
    """Shared env servers (UV processes or containers) for one env target; see the
    module docstring.

    `start()` launches the first server; rollouts in this process lease through
    `local()`, rollouts in other processes through the URL `serve_http()` returns
    (`EnvTarget.pool_url`). Thread-safe; `close()` is idempotent.
    """

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
        self._target = target
        self._sessions_per_server = sessions_per_server
        # A fixed port can only be bound once.
        self._max_servers = 1 if "port" in target.provider_kwargs else max_servers
        self._capacity_wait_s = capacity_wait_s
        self._cond = threading.Condition()
        self._servers: list[PooledServer] = []
        self._leases: dict[str, Lease] = {}
        self._waiting = 0
        """Lease requests waiting for room."""
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = (
            set()
        )
        self._last_release = time.monotonic()
        self._last_reap = 0.0
        self._failure: str | None = None
        self._ever_up = False
        self._capacity_seen = 0
        """The largest session limit of a server dropped, or the most sessions it
        held: what a pool whose servers were all lost grows at."""
        self._failed_launches = 0
        """Launches failed in a row since one last came up."""
        self._closed = False
        self._started = False
        self._owner = ThreadPoolExecutor(1, thread_name_prefix="openenv-v1-launcher")
        self._http: LocalEndpoint | None = None

    @property
    def url(self) -> str:
        """The lease endpoint's address (`local_http`: its socket and token)."""
        assert self._http is not None, "ServerPool.serve_http() was not called"
        return self._http.address

    def start(self) -> None:
        """Launch the first server; returns at once (it comes up in the background)."""
        with self._cond:
            if self._started:
                return
            self._started = True
            first = self._launch_locked()
            # A plan may run several servers from the start (a Swarm service's
            # tasks in host mode): each is a server of the pool.
            for _ in range(first.servers_at_start - 1):
                if self._max_servers is not None:
                    if len(self._servers) >= self._max_servers:
                        break
                self._launch_locked()
        atexit.register(self.close)

    def serve_http(self) -> str:
        """Start the pool (if not yet) and serve leases to other processes of this
        eval; returns the lease endpoint's address (`local_http.local_client`)."""
        if self._http is None:
            self._http = LocalEndpoint(
                functools.partial(answer_lease_request, self), name="pool"
            )
            self._http.start_in_thread()
        self.start()
        return self.url

    def local(self) -> LocalLeases:
        """Leases for rollouts in this process: no socket, no thread per wait."""
        self.start()
        return LocalLeases(self)

    def lease(
        self, pid: int, rejected: str | None = None, unreachable: str | None = None
    ) -> tuple[str, str]:
        """A `(lease id, server URL)` with room for one more session, waiting for a
        server to start or a session to end. Raises `EnvFailure` when no server can be
        had: a failed launch (with its diagnosis), or every server full, with no
        session ending, for longer than `capacity_wait_s`.

        `rejected` hands back a lease whose server answered `CAPACITY_REACHED`;
        `unreachable` one whose server could not be connected to, which is dropped
        (and stopped) unless it answers `/health`. Blocks the calling thread; see
        `lease_async` for the event loop's way."""
        if unreachable is not None:
            self._check_unreachable(unreachable)
        wait = LeaseWait()
        with self._cond:
            if rejected is not None:
                self._learn_capacity_locked(rejected)
            self._waiting += 1
            try:
                while (got := self._try_lease_locked(pid, wait)) is None:
                    self._cond.wait(_WAIT_POLL_S)
                return got
            finally:
                self._waiting -= 1

    async def lease_async(
        self,
        rejected: str | None = None,
        unreachable: str | None = None,
        pid: int | None = None,
    ) -> tuple[str, str]:
        """`lease` for a rollout on an event loop (`pid`: the leasing process, this
        one by default): it waits on a future the pool completes when a server
        comes up or a session ends, so hundreds of waiting rollouts hold no
        thread."""
        if unreachable is not None:
            await anyio.to_thread.run_sync(self._check_unreachable, unreachable)
        loop = asyncio.get_running_loop()
        wait, pid = LeaseWait(), os.getpid() if pid is None else pid
        with self._cond:
            if rejected is not None:
                self._learn_capacity_locked(rejected)
            self._waiting += 1
        try:
            while True:
                changed = loop.create_future()
                with self._cond:
                    got = self._try_lease_locked(pid, wait)
                    if got is not None:
                        return got
                    self._async_waiters.add((loop, changed))
                try:
                    await asyncio.wait([changed], timeout=_WAIT_POLL_S)
                finally:
                    with self._cond:
                        self._async_waiters.discard((loop, changed))
        finally:
            with self._cond:
                self._waiting -= 1

    def confirm(self, lease_id: str) -> None:
        """The leased session was accepted: it counts toward what the server is
        known to hold (and a limit learned too low is raised to it)."""
        with self._cond:
            lease = self._leases.get(lease_id)
            if lease is None:
                return
            if lease.server.confirm(lease_id):
                self._notify_locked()

    def release(self, lease_id: str, lost: bool = False) -> None:
        """The rollout is done with its session. `lost`: its server failed it (a
        refused or closed connection): no lease goes to that server again unless it
        answers `/health` (`unreachable` of `lease`, without a lease in return)."""
        if lost:
            self._check_unreachable(lease_id)
            return
        with self._cond:
            if self._drop_lease_locked(lease_id) is not None:
                self._last_release = time.monotonic()
                self._notify_locked()

    def close(self) -> None:
        """Stop serving leases and stop every launched server (their whole process
        groups). Safe to call more than once."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            servers, self._servers = self._servers, []
            self._leases.clear()
            self._notify_locked()
        if self._http is not None:
            self._http.close()
        for server in servers:
            with contextlib.suppress(Exception):
                server.provider.stop()
        self._owner.shutdown(wait=False)
        with contextlib.suppress(Exception):
            atexit.unregister(self.close)

    def servers(self) -> list[str]:
        """URLs of the servers that are up, for logs and tests."""
        with self._cond:
            return [s.url for s in self._servers if s.ready and s.url]

    def leases_held(self) -> int:
        """Leases not yet handed back, for logs and tests."""
        with self._cond:
            return len(self._leases)

    def launched(self) -> int:
        """Servers launched so far, up or starting, for logs and benchmarks."""
        with self._cond:
            return len(self._servers)

    # --- internals; `_locked` methods run with `self._cond` held ---

    def _try_lease_locked(self, pid: int, wait: LeaseWait) -> tuple[str, str] | None:
        """A lease on the least busy server with room, or None to wait; launches the
        servers the waiting leases need. Raises `EnvFailure` as `lease` says."""
        if self._closed:
            raise EnvFailure("the shared env server pool was closed")
        self._reap_locked()
        candidates = [s for s in self._servers if s.has_room()]
        if candidates:
            server = min(candidates, key=lambda s: len(s.leases))
            lease_id = uuid.uuid4().hex
            server.leases.add(lease_id)
            self._leases[lease_id] = Lease(server, pid)
            assert server.url is not None
            return lease_id, server.url
        # A suspect server is being probed: wait for its verdict, as for a start.
        starting = any(not s.ready or s.suspect for s in self._servers)
        if not starting and self._failure is not None:
            raise EnvFailure(self._failure)
        if any(s.settling() or s.capacity is None for s in self._servers):
            # Sessions on trial (on a server of unknown limit, or one that may
            # hold more than it seemed) end within one request's timeout; then the
            # limits are known and the launches below fit the demand.
            return None
        if starting or self._grow_locked():
            # A starting server's own launch timeout bounds the wait.
            wait.full_since = None
            return None
        now = time.monotonic()
        wait.full_since = wait.full_since or now
        stuck_since = max(wait.full_since, self._last_release)
        if now - stuck_since >= self._capacity_wait_s:
            raise EnvFailure(
                f"{self._target.env}: all {len(self._servers)} shared env "
                "server(s) stayed at their session limit, with no session ending, "
                f"for {self._capacity_wait_s:.0f}s ({self._growth_limit()}; raise "
                f"{setting('max_servers')} or the server's session limit, or lower "
                "the eval's concurrency)"
            )
        return None

    def _grow_locked(self) -> bool:
        """Every server is up and full (or none is left): launch as many as the
        leases held and waited for need, at the largest session limit seen, that of
        servers lost included; one alone while no limit is known (as at the start).
        False when none may be launched (`max_servers`, or the host's memory)."""
        per_server = max(
            (s.capacity for s in self._servers if s.capacity is not None),
            default=self._capacity_seen,
        )
        demand = len(self._leases) + self._waiting
        room = sum(s.capacity or per_server for s in self._servers)
        wanted = max(1, math.ceil((demand - room) / per_server)) if per_server else 1
        if self._max_servers is not None:
            wanted = min(wanted, self._max_servers - len(self._servers))
        launched = 0
        while launched < wanted and self._memory_allows_launch_locked():
            self._launch_locked()
            launched += 1
        return launched > 0

    def _growth_limit(self) -> str:
        if self._max_servers is None or len(self._servers) < self._max_servers:
            return "the host has too little free memory for another server"
        if "port" in self._target.provider_kwargs:
            return f"{setting('provider_kwargs.port')} lets one server bind it"
        return f"{setting('max_servers', self._max_servers)} is set"

    def _memory_allows_launch_locked(self) -> bool:
        """With no `max_servers`, a launch must leave `MEMORY_FLOOR_BYTES` free, or
        twice the memory of the largest running server, whichever is more."""
        if self._max_servers is not None or not self._servers:
            return True
        available = available_memory()
        if available is None:
            return True
        largest = max((s.rss for s in self._servers), default=0)
        return available - largest >= max(MEMORY_FLOOR_BYTES, 2 * largest)

    def _notify_locked(self) -> None:
        """Wake every waiting lease: threads on the condition, coroutines through
        their future (on their own loop)."""
        self._cond.notify_all()
        waiters, self._async_waiters = self._async_waiters, set()
        for loop, changed in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed
                loop.call_soon_threadsafe(_complete, changed)

    def _launch_locked(self) -> LaunchPlan:
        """Launch one more server in the background; returns its plan."""
        plan = launch_plan(self._target)
        plan.launcher.run_on_owner = self._on_owner
        server = PooledServer(
            provider=plan.launcher, capacity=self._sessions_per_server
        )
        self._servers.append(server)
        threading.Thread(
            target=self._bring_up,
            args=(server, plan.start_args),
            name="openenv-v1-ready",
            daemon=True,
        ).start()
        return plan

    def _bring_up(self, server: PooledServer, start_args: Mapping[str, Any]) -> None:
        """Fork the server from the owner thread, then wait for `/health` here."""
        try:
            self._on_owner(lambda: server.provider.start(**start_args))
            url = server.provider.wait_for_ready()
        except Exception as e:
            with contextlib.suppress(Exception):
                server.provider.stop()
            # Its output tail may echo the server's environment.
            failure = redact(
                str(launch_failure(self._target, e)), self._target.secret_env.values()
            )
            with self._cond:
                closed = self._closed
                if server in self._servers:
                    self._servers.remove(server)
                self._failed_launches += 1
                lost = self._ever_up and self._failed_launches < LAUNCH_FAILURES
                if not closed and not lost:
                    self._failure = failure
                self._notify_locked()
            if closed:
                # `close` stopped it mid-launch: no failure, nobody waits for it.
                logger.info("launch of %s cancelled: the pool closed", self._target.env)
            elif lost:
                # Others came up from the same plan: this server's own loss (killed
                # while starting); the waiting leases launch its replacement.
                logger.warning("a shared env server was lost starting: %s", failure)
            else:
                logger.error("%s", self._failure)
            return
        rss = group_rss(server.provider)
        with self._cond:
            server.url, server.ready, server.rss = url, True, rss
            self._ever_up, self._failed_launches, self._failure = True, 0, None
            self._notify_locked()
        choice = server.provider.app_choice
        logger.info(
            "shared env server for %s up at %s, serving app %s (%s)",
            self._target.env,
            url,
            choice.app if choice else "?",
            choice.source if choice else "?",
        )

    def _on_owner(self, fn: Callable[[], Any]) -> Any:
        """Run `fn` on the launcher thread, which launched servers die with."""
        return self._owner.submit(fn).result()

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

    def _reap_locked(self) -> None:
        """Drop leases of processes that are gone and servers that died (at most
        every `_REAP_EVERY_S`: a burst of waiting leases all tries at once)."""
        now = time.monotonic()
        if now - self._last_reap < _REAP_EVERY_S:
            return
        self._last_reap = now
        own = os.getpid()
        for lease_id, lease in list(self._leases.items()):
            if lease.pid != own and not process_running(lease.pid):
                self._drop_lease_locked(lease_id)
        for server in list(self._servers):
            if server.ready and not server.alive():
                self._drop_server_locked(server, "exited")

    def _check_unreachable(self, lease_id: str) -> None:
        """A rollout lost its leased server (could not connect, or the connection
        was refused or closed). It takes no new leases from now; one whose process
        is gone is dropped at once. Else the process may still look alive (uv
        outlives uvicorn for a moment; a hung server never exits), and a busy one
        may just be slow: its `/health` is probed, off the lock and in the
        background, and it is dropped only after `HEALTH_PROBES` failures in a
        row."""
        with self._cond:
            lease = self._drop_lease_locked(lease_id)
            self._notify_locked()
            if lease is None or lease.server.url is None or lease.server.suspect:
                return
            if lease.server not in self._servers:
                return
            if not lease.server.alive():
                self._drop_server_locked(lease.server, "exited")
                return
            lease.server.suspect = True
        threading.Thread(
            target=self._probe_suspect,
            args=(lease.server,),
            name="openenv-v1-probe",
            daemon=True,
        ).start()

    def _probe_suspect(self, server: PooledServer) -> None:
        assert server.url is not None
        for attempt in range(HEALTH_PROBES):
            if attempt:
                time.sleep(_PROBE_SPACING_S)
            if self._closed:
                return
            if answers_health(server.url):
                with self._cond:
                    server.suspect = False
                    self._notify_locked()
                return
        with self._cond:
            if server in self._servers:
                self._drop_server_locked(
                    server, f"failed {HEALTH_PROBES} /health probes in a row"
                )

    def _drop_server_locked(self, server: PooledServer, why: str) -> None:
        """Forget a broken server and its leases; its process group is killed off
        the lock, with no grace period since it is not serving anyone."""
        logger.warning("shared env server %s %s; dropping it", server.url, why)
        self._servers.remove(server)
        held = server.capacity or len(server.confirmed)
        self._capacity_seen = max(self._capacity_seen, held)
        for lease_id in server.leases:
            self._leases.pop(lease_id, None)
        server.leases.clear()
        server.confirmed.clear()
        threading.Thread(
            target=_kill_quietly, args=(server.provider,), name="openenv-v1-stop"
        ).start()
        self._notify_locked()


def _complete(changed: asyncio.Future) -> None:
    if not changed.done():
        changed.set_result(None)


def _kill_quietly(provider: Launcher) -> None:
    with contextlib.suppress(Exception):
        provider.stop(grace_s=0.0)
