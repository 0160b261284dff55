"""Open a connected OpenEnv client, as `EnvTarget` says: `base_url` (a running
server), `base_urls` (running servers leased from their desk, `url_pool`), `pool` /
`pool_url` (a session on a `ServerPool`'s shared server), or `env` (a launch for this
episode alone, at the place `plan` picks). Everything opened is registered on the
caller's `AsyncExitStack`, which closes the session and stops (or hands back) the
server on success, error or cancellation alike. `EnvSession` is an episode's session
and its moves to fresh ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
from websockets.exceptions import ConnectionClosed

from openenv_v1.core.errors import EnvFailure, describe, server_error_code
from openenv_v1.core.launch.env_target import EnvTarget
from openenv_v1.core.launch.http_only import http_only_refusal
from openenv_v1.core.launch.leases import PoolClient, PoolLeases
from openenv_v1.core.launch.plan import (
    Launcher,
    launch_failure,
    launch_plan,
    launcher_label,
)
from openenv_v1.core.launch.url_pool import own_desk
from openenv_v1.core.light_import import generic_client_class
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

# Refused sessions a rollout retries on other shared servers before giving up.
_MAX_REFUSALS = 50
# Connection failures on leased servers before the rollout gives up.
_MAX_UNREACHABLE = 3
FRESH_STARTS = 3
"""Times an episode starts again on a fresh shared session, its server lost before
its first model turn (`EnvSession`)."""


async def open_env(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    *,
    on_launch: Callable[[Launcher], None] | None = None,
) -> Any:
    """A connected `GenericEnvClient` for `target`, closed (and its server stopped or
    handed back) by `stack`; `EnvFailure` naming the cause when it cannot be had.
    `on_launch` gets the launcher of a launch of its own once its server is ready."""
    if target.base_url:
        return await _connect(target, target.base_url, stack, what="the OpenEnv server")
    if _leases_sessions(target):
        return await _open_leased(target, stack)
    if not target.env:
        raise EnvFailure(
            f"no environment: set {setting('env')} (an OpenEnv id) or "
            f"{setting('base_url')}"
        )
    return await _open_launched(target, stack, on_launch)


async def _connect(
    target: EnvTarget, url: str, stack: contextlib.AsyncExitStack, *, what: str
) -> Any:
    client = generic_client_class()(
        base_url=url,
        connect_timeout_s=target.connect_timeout_s,
        message_timeout_s=target.message_timeout_s,
    )
    try:
        return await stack.enter_async_context(client)
    except Exception as e:
        why = await http_only_refusal(url, e) or describe(e)
        raise EnvFailure(f"cannot connect to {what} at {url}: {why}") from e


async def _open_launched(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    on_launch: Callable[[Launcher], None] | None,
) -> Any:
    """Launch a server for this episode alone (`plan.launch_plan`). A UV server
    starts on the calling thread, which its parent-death signal is tied to (its
    relaunches too: `run_on_owner`); other launchers block (a build, `docker run`,
    an SDK), so they start off the event loop. Waits are abandoned on cancellation:
    the stack's `stop` ends what was started. Failures are redacted."""
    uv = target.launcher == "uv"
    try:
        plan = launch_plan(target)
    except Exception as e:
        if uv:
            raise
        raise launch_failure(target, e) from None
    provider = plan.launcher
    start = functools.partial(provider.start, **plan.start_args)
    try:
        if uv:
            provider.run_on_owner = anyio.from_thread.run_sync
            stack.callback(provider.stop)
            start()
        else:
            stack.push_async_callback(anyio.to_thread.run_sync, provider.stop)
            await anyio.to_thread.run_sync(start, abandon_on_cancel=True)
        url = await anyio.to_thread.run_sync(
            provider.wait_for_ready, abandon_on_cancel=True
        )
    except Exception as e:
        raise launch_failure(target, e) from None
    if on_launch is not None:
        on_launch(provider)
    how = launcher_label(target.launcher)
    what = f"the {target.env} server launched with {how}"
    if uv:
        what = f"the launched {target.env} server"
    return await _connect(target, url, stack, what=what)


@dataclass
class Held:
    """How a leased session's lease goes back: `lost` once its server failed it."""

    lost: bool = False


class EnvSession:
    """The session an episode plays on: `open()` opens one as `open_env` does;
    `start_again(exc)` says whether the episode may open again before its first
    model turn (a leased session whose server was lost, `FRESH_STARTS` at most);
    `move(exc)` gives the session up mid-episode (a lease goes back as lost, taking
    its server out; a launch of its own is stopped; the next `open()` gets a fresh
    one, where the episode resumes by replay)."""

    def __init__(
        self,
        target: EnvTarget,
        stack: contextlib.AsyncExitStack,
        *,
        on_launch: Callable[[Launcher], None] | None = None,
    ) -> None:
        self.target = target
        self._on_launch = on_launch
        self._stack = stack
        self._session: contextlib.AsyncExitStack | None = None
        self._held = Held()
        self._starts_left = FRESH_STARTS
        self.leased = _leases_sessions(target)
        self.contracts = _lease_desk(target).contracts if self.leased else None
        """Where this process's episodes keep what they learned of the contracts of
        the servers leased to them (`leases.ServerContracts`), or None."""

    async def open(self) -> Any:
        """A connected client on a new session."""
        self._session = await self._stack.enter_async_context(
            contextlib.AsyncExitStack()
        )
        self._held = Held()
        if self.leased:
            return await _open_leased(self.target, self._session, self._held)
        if self._on_launch is None:
            return await open_env(self.target, self._session)
        return await open_env(self.target, self._session, on_launch=self._on_launch)

    async def start_again(self, exc: BaseException) -> bool:
        if (
            not self.leased
            or self._session is None
            or not self._starts_left
            or not server_lost(exc)
        ):
            return False
        self._starts_left -= 1
        await self.move(exc)
        return True

    async def move(self, exc: BaseException) -> None:
        """Close the current session, lost to `exc`; its lease goes back as lost."""
        self._held.lost = True
        session, self._session = self._session, None
        if session is None:
            return
        logger.info("%s: session lost (%s)", self.target.label, describe(exc))
        # Closing a socket the server dropped may raise; the lease goes back anyway.
        with contextlib.suppress(Exception):
            await session.aclose()


def server_lost(exc: BaseException) -> bool:
    """Whether `exc`, or what caused it, is a lost connection to the server (refused,
    reset or closed, or a TCP connect that timed out: an unreachable host, as a node
    cut off): not a timeout of a request the server took, nor an answer of its own."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, httpx.ConnectTimeout):
            return True
        if isinstance(cause, TimeoutError | httpx.TimeoutException):
            return False
        lost = ConnectionError | ConnectionClosed | httpx.NetworkError
        if isinstance(cause, lost | httpx.RemoteProtocolError):
            return True
        cause = cause.__cause__ or (
            None if cause.__suppress_context__ else cause.__context__
        )
    return False


def _leases_sessions(target: EnvTarget) -> bool:
    """Whether `target`'s session is leased (a pool, or `base_urls`' desk)."""
    if target.base_url:
        return False
    return target.pool is not None or bool(target.pool_url or target.base_urls)


def _lease_desk(target: EnvTarget) -> PoolLeases:
    if target.pool is not None:
        return target.pool
    if target.pool_url:
        return PoolClient(target.pool_url)
    # A process without the eval's desk (a user simulator off this host).
    return own_desk(target.base_urls).local()


def _servers_named(target: EnvTarget) -> str:
    """What the servers a session is leased on are called in messages."""
    return f"shared {target.env}" if target.env else "OpenEnv"


async def _hand_back(pool: PoolLeases, lease: str, held: Held) -> None:
    await pool.release(lease, lost=held.lost)


async def _open_leased(
    target: EnvTarget, stack: contextlib.AsyncExitStack, held: Held | None = None
) -> Any:
    """A session on a leased server, its lease handed back as `held` says. A full
    server is found out by a first cheap request (`_session_taken`): its lease goes
    back as `rejected`; one that cannot be connected to or drops that request goes
    back as `unreachable`, and another is leased (a few times at most)."""
    pool = _lease_desk(target)
    held = held or Held()
    rejected: str | None = None
    unreachable: str | None = None
    unreachable_left = _MAX_UNREACHABLE
    for _ in range(_MAX_REFUSALS):
        lease, url = await pool.lease(rejected=rejected, unreachable=unreachable)
        rejected = unreachable = None
        async with contextlib.AsyncExitStack() as session:
            session.push_async_callback(_hand_back, pool, lease, held)
            client = None
            try:
                client = await _connect(
                    target, url, session, what=f"the {_servers_named(target)} server"
                )
                taken = await _session_taken(target, client, url)
            except EnvFailure as e:
                lost = client is None or server_lost(e)
                unreachable_left -= 1
                if not lost or unreachable_left <= 0:
                    held.lost = lost
                    raise
                session.pop_all()  # the lease goes back as `unreachable` instead
                if client is not None:
                    with contextlib.suppress(Exception):
                        await client.close()
                unreachable = lease
                continue
            if not taken:
                session.pop_all()  # the lease goes back as `rejected` instead
                await client.close()
                rejected = lease
                continue
            await pool.confirm(lease)
            stack.push_async_exit(session.pop_all())
            return client
    raise EnvFailure(f"the {_servers_named(target)} servers kept refusing sessions")


async def _session_taken(target: EnvTarget, client: Any, url: str) -> bool:
    """Whether the server at `url` kept `client`'s session: False when it answered
    the first request `CAPACITY_REACHED`; `EnvFailure` when it did not answer in
    time, or failed without an error frame."""
    try:
        # The server builds the session's env as the socket opens, and some envs
        # are slow to build: the probe gets the longest call's time.
        await asyncio.wait_for(client.state(), target.message_timeout_s)
    except TimeoutError as e:
        raise EnvFailure(
            f"the {_servers_named(target)} server at {url} did not answer a first "
            f"request within {target.message_timeout_s:.0f}s (building the "
            "env for a new session may be that slow: raise "
            f"{setting('reset_timeout_s')})"
        ) from e
    except Exception as e:
        code = server_error_code(e)
        if code is None:
            raise EnvFailure(
                f"the {_servers_named(target)} server at {url} failed a first "
                f"request: {describe(e)}"
            ) from e
        # Any other error frame is the env's own (some envs refuse `state` before
        # a reset): the session exists.
        return code != "CAPACITY_REACHED"
    return True
