"""Env servers launched once and shared by many rollouts, each on its own session.

An OpenEnv server gives every WebSocket connection its own environment instance, up to
its session limit. So one launched server can serve many rollouts at once, instead of
each rollout paying for its own `uv run ... uvicorn` start. `ServerPool` lives in the
process that builds the taskset (the eval, or one env-server worker):

- it launches the first server as soon as it is built, so the start-up overlaps the
  framework's own;
- rollouts lease a server over a small loopback HTTP endpoint (`LEASE_PATH`); a lease
  names the server URL and is returned when the rollout ends, or reclaimed when the
  leasing process is gone;
- the session limit is learned: a rollout refused with `CAPACITY_REACHED` hands its
  lease back as `rejected`, which caps that server at the sessions it already holds,
  and one more server is launched (up to `max_servers`, if set) while every one is
  full;
- a failed launch (wrong `app`, missing dependency) fails every waiting lease at once
  with the launcher's diagnosis; a server that dies later is dropped and replaced, as
  is one a rollout could not reach (its lease handed back as `unreachable`) that then
  fails a health check.

Servers are forked from one long-lived thread, which is what their parent-death signal
is tied to: if this process is killed outright, they still get SIGTERM. `close()` (also
run at exit) stops them all.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.launch import EnvTarget
from openenv_v1.core.launchers import launch_failure, launch_plan

logger = logging.getLogger(__name__)

LEASE_PATH = "lease"
RELEASE_PATH = "release"


@dataclass(eq=False)
class _Server:
    provider: Any
    url: str | None = None
    ready: bool = False
    capacity: int | None = None
    """Sessions it accepts at once; None until configured or learned."""
    leases: set[str] = field(default_factory=set)

    def has_room(self) -> bool:
        return self.ready and (
            self.capacity is None or len(self.leases) < self.capacity
        )

    def alive(self) -> bool:
        return self.provider.running()


@dataclass(frozen=True)
class _Lease:
    server: _Server
    pid: int


class ServerPool:
    """Shared UV-launched servers for one env target; see the module docstring.

    `start()` returns the lease endpoint's base URL, which rollouts pass as
    `EnvTarget.pool_url`. Thread-safe; `close()` is idempotent.
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
        self._servers: list[_Server] = []
        self._leases: dict[str, _Lease] = {}
        self._failure: str | None = None
        self._closed = False
        self._owner = ThreadPoolExecutor(1, thread_name_prefix="openenv-v1-launcher")
        self._http: ThreadingHTTPServer | None = None
        self._token = secrets.token_urlsafe(16)

    @property
    def url(self) -> str:
        assert self._http is not None, "ServerPool.start() was not called"
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/{self._token}"

    def start(self) -> str:
        """Serve leases and launch the first server; returns the lease endpoint URL."""
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._http.daemon_threads = True
        threading.Thread(
            target=self._http.serve_forever, name="openenv-v1-pool", daemon=True
        ).start()
        with self._cond:
            self._launch_locked()
        atexit.register(self.close)
        return self.url

    def lease(
        self, pid: int, rejected: str | None = None, unreachable: str | None = None
    ) -> tuple[str, str]:
        """A `(lease id, server URL)` with room for one more session, waiting for a
        server to start or a session to end. Raises `EnvFailure` when no server can be
        had: a failed launch (with its diagnosis), or every server full for longer than
        `capacity_wait_s`.

        `rejected` hands back a lease whose server answered `CAPACITY_REACHED`;
        `unreachable` one whose server could not be connected to, which is dropped
        (and stopped) unless it answers `/health`."""
        if unreachable is not None:
            self._check_unreachable(unreachable)
        full_since: float | None = None
        with self._cond:
            if rejected is not None:
                self._learn_capacity_locked(rejected)
            while True:
                if self._closed:
                    raise EnvFailure("the shared env server pool was closed")
                self._reap_locked()
                candidates = [s for s in self._servers if s.has_room()]
                if candidates:
                    server = min(candidates, key=lambda s: len(s.leases))
                    lease_id = uuid.uuid4().hex
                    server.leases.add(lease_id)
                    self._leases[lease_id] = _Lease(server, pid)
                    assert server.url is not None
                    return lease_id, server.url
                if any(not s.ready for s in self._servers):
                    # A server is starting: its own launch timeout bounds the wait.
                    full_since = None
                elif self._failure is not None:
                    raise EnvFailure(self._failure)
                elif (
                    self._max_servers is None or len(self._servers) < self._max_servers
                ):
                    self._launch_locked()
                    continue
                else:
                    full_since = full_since or time.monotonic()
                    if time.monotonic() - full_since >= self._capacity_wait_s:
                        raise EnvFailure(
                            f"{self._target.env}: all {len(self._servers)} shared env "
                            "server(s) stayed at their session limit for "
                            f"{self._capacity_wait_s:.0f}s (raise taskset.max_servers, "
                            "or lower the eval's concurrency)"
                        )
                self._cond.wait(0.5)

    def release(self, lease_id: str) -> None:
        with self._cond:
            if self._drop_lease_locked(lease_id) is not None:
                self._cond.notify_all()

    def close(self) -> None:
        """Stop serving leases and stop every launched server (their whole process
        groups). Safe to call more than once."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            servers, self._servers = self._servers, []
            self._leases.clear()
            self._cond.notify_all()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
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

    # --- internals; `_locked` methods run with `self._cond` held ---

    def _launch_locked(self) -> None:
        provider, start_args = launch_plan(self._target)
        provider.run_on_owner = self._on_owner
        server = _Server(provider, capacity=self._sessions_per_server)
        self._servers.append(server)
        threading.Thread(
            target=self._bring_up,
            args=(server, start_args),
            name="openenv-v1-ready",
            daemon=True,
        ).start()

    def _bring_up(self, server: _Server, start_args: dict[str, Any]) -> None:
        """Fork the server from the owner thread, then wait for `/health` here."""
        try:
            url = self._on_owner(lambda: server.provider.start(**start_args))
            server.provider.wait_for_ready()
        except Exception as e:
            with contextlib.suppress(Exception):
                server.provider.stop()
            with self._cond:
                if server in self._servers:
                    self._servers.remove(server)
                self._failure = str(launch_failure(self._target, e))
                self._cond.notify_all()
            logger.error("%s", self._failure)
            return
        with self._cond:
            server.url, server.ready = url, True
            self._cond.notify_all()
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

    def _drop_lease_locked(self, lease_id: str) -> _Lease | None:
        lease = self._leases.pop(lease_id, None)
        if lease is not None:
            lease.server.leases.discard(lease_id)
        return lease

    def _learn_capacity_locked(self, lease_id: str) -> None:
        lease = self._drop_lease_locked(lease_id)
        if lease is None:
            return
        server = lease.server
        limit = max(1, len(server.leases))
        if server.capacity is None or limit < server.capacity:
            server.capacity = limit
            logger.info("env server %s holds at most %d sessions", server.url, limit)
        self._cond.notify_all()

    def _reap_locked(self) -> None:
        """Drop leases of processes that are gone and servers that died."""
        for lease_id, lease in list(self._leases.items()):
            if not _pid_alive(lease.pid):
                self._drop_lease_locked(lease_id)
        for server in list(self._servers):
            if server.ready and not server.alive():
                self._drop_server_locked(server, "exited")

    def _check_unreachable(self, lease_id: str) -> None:
        """A rollout could not connect to its leased server. The process may still
        look alive (uv outlives uvicorn for a moment; a hung server never exits), so
        ask `/health` itself, off the lock, and drop the server if it does not answer."""
        with self._cond:
            lease = self._drop_lease_locked(lease_id)
            self._cond.notify_all()
        if lease is None or lease.server.url is None:
            return
        if _answers_health(lease.server.url):
            return
        with self._cond:
            if lease.server in self._servers:
                self._drop_server_locked(lease.server, "does not answer /health")

    def _drop_server_locked(self, server: _Server, why: str) -> None:
        """Forget a broken server and its leases; its process group is killed off
        the lock, with no grace period since it is not serving anyone."""
        logger.warning("shared env server %s %s; dropping it", server.url, why)
        self._servers.remove(server)
        for lease_id in server.leases:
            self._leases.pop(lease_id, None)
        server.leases.clear()
        threading.Thread(
            target=_kill_quietly, args=(server.provider,), name="openenv-v1-stop"
        ).start()
        self._cond.notify_all()


def _answers_health(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as http:
            return http.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def _kill_quietly(provider: Any) -> None:
    with contextlib.suppress(Exception):
        provider.stop(grace_s=0.0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _handler_for(pool: ServerPool) -> type[BaseHTTPRequestHandler]:
    prefix = f"/{pool._token}/"

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if not self.path.startswith(prefix):
                self._reply(404, {"error": "not found"})
                return
            action = self.path[len(prefix) :]
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body: Mapping[str, Any] = json.loads(self.rfile.read(length) or b"{}")
                if action == LEASE_PATH:
                    lease_id, url = pool.lease(
                        int(body["pid"]),
                        rejected=body.get("rejected"),
                        unreachable=body.get("unreachable"),
                    )
                    self._reply(200, {"lease": lease_id, "url": url})
                elif action == RELEASE_PATH:
                    pool.release(str(body["lease"]))
                    self._reply(200, {})
                else:
                    self._reply(404, {"error": f"unknown action {action!r}"})
            except EnvFailure as e:
                self._reply(503, {"error": str(e)})
            except (KeyError, TypeError, ValueError) as e:
                self._reply(400, {"error": f"bad request: {describe(e)}"})

        def _reply(self, status: int, body: Mapping[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            # The URL path carries the pool token: keep requests out of the logs.
            return

    return Handler
