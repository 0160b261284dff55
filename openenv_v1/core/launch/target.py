"""Open a connected OpenEnv client: a shared server, a launch of one's own, or a base_url.

Five ways, chosen by `EnvTarget` (`env_target`; importable from here too, as
everything here takes one):

- `base_url`: connect to a running server; nothing is launched.
- `base_urls`: several running servers, leased like shared ones from their desk
  (`url_pool.UrlPool`: the eval's, in process or over its endpoint, else this
  process's own); nothing is launched.
- `pool` / `pool_url`: lease a server from a `ServerPool` (shared UV-launched
  servers), in this process or over its loopback endpoint, and open a session of
  one's own on it.
- `env`: launch a server for this episode alone with the launcher `plan` picks:
  OpenEnv's UV provider by default (`uv.SupervisedUVProvider`), a container with
  `use_docker` (`docker.container.DockerLaunch`), or the `provider` set.

Everything opened is registered on the caller's `AsyncExitStack`, so closing the stack
closes the WebSocket session and stops (or hands back) the server, on success, error
or cancellation alike.

`EnvSession` is the session of one episode until its first model turn: an episode whose
shared server is lost before then (`server_lost`: a refused, reset or closed
connection in its schema read or reset) hands that lease back as lost, which takes the
server out of the pool, and starts again on a fresh session, a few times at most.
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

from openenv_v1.core.errors import EnvFailure, describe, redact, server_error_code
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
    handed back) by `stack`. Raises `EnvFailure` naming the cause when it cannot be
    had. `on_launch` is given the launcher of a launch of its own once the server is
    ready: a UV launch's `SupervisedUVProvider` (which app it serves, and why), a Docker
    launch's `DockerLaunch` (its image, build and container)."""
    if target.base_url:
        return await _connect(target, target.base_url, stack, what="the OpenEnv server")
    if _leases_sessions(target):
        return await _open_leased(target, stack)
    if not target.env:
        raise EnvFailure(
            f"no environment: set {setting('env')} (an OpenEnv id) or "
            f"{setting('base_url')}"
        )
    if target.launcher != "uv":
        return await _open_launched(target, stack, on_launch)
    return await _open_uv(target, stack, on_launch)


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


async def _open_uv(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    on_launch: Callable[[Launcher], None] | None,
) -> Any:
    """Launch a server for this episode alone. `start()` runs on the calling thread,
    which the server's parent-death signal is tied to, and so does the relaunch of a
    next app candidate; readiness is awaited off the event loop."""
    plan = launch_plan(target)  # `uv.uv_launch_plan`
    provider = plan.launcher
    provider.run_on_owner = anyio.from_thread.run_sync
    stack.callback(provider.stop)
    try:
        provider.start(**plan.start_args)
        # Abandoned on cancellation: the stack's `stop` then ends the server, and
        # with it the wait.
        url = await anyio.to_thread.run_sync(
            provider.wait_for_ready, abandon_on_cancel=True
        )
    except Exception as e:
        # Its output tail may echo the server's environment.
        failure = str(launch_failure(target, e))
        raise EnvFailure(redact(failure, target.secret_env.values())) from None
    if on_launch is not None:
        on_launch(provider)
    return await _connect(target, url, stack, what=f"the launched {target.env} server")


async def _open_launched(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    on_launch: Callable[[Launcher], None] | None,
) -> Any:
    """Run a server for this episode alone with the launcher `target.launcher` names
    (`plan.launch_plan`: Docker's container, a Swarm service, a cloud sandbox).
    Their calls block (a build, `docker run`, an SDK's requests, the readiness wait),
    so they run off the event loop; on cancellation they are abandoned and the
    stack's `stop` ends what was started (a start still under way ends its own once
    it returns). A failure names the launcher, with secret values redacted.
    `on_launch` gets the launcher once its server is ready (`check` reports it)."""
    try:
        plan = launch_plan(target)
    except Exception as e:
        raise _redacted_failure(target, e) from None
    provider = plan.launcher
    stack.push_async_callback(anyio.to_thread.run_sync, provider.stop)
    try:
        await anyio.to_thread.run_sync(
            functools.partial(provider.start, **plan.start_args),
            abandon_on_cancel=True,
        )
        url = await anyio.to_thread.run_sync(
            provider.wait_for_ready, abandon_on_cancel=True
        )
    except Exception as e:
        raise _redacted_failure(target, e) from None
    if on_launch is not None:
        on_launch(provider)
    how = launcher_label(target.launcher)
    return await _connect(
        target, url, stack, what=f"the {target.env} server launched with {how}"
    )


def _redacted_failure(target: EnvTarget, exc: Exception) -> EnvFailure:
    """The launch failure of `target`; launchers' messages may quote a command line
    or an SDK's request, so secret values are replaced."""
    failure = launch_failure(target, exc)
    return EnvFailure(redact(str(failure), target.secret_env.values()))


@dataclass
class Held:
    """How a leased session's lease goes back: `lost` once its server failed it."""

    lost: bool = False


class EnvSession:
    """The session an episode plays on, and its moves to fresh ones: `open()` opens
    one as `open_env` does (closed by the caller's stack, or by a move), and

    - `start_again(exc)` says whether the episode may open again after `exc` while
      no model turn has been spent on it: only on leased sessions (shared servers,
      or the servers of `base_urls`), when its server was lost (`server_lost`) and
      `FRESH_STARTS` are not spent;
    - `move(exc)` gives the session up for good mid-episode (the episode resumes by
      replay on the next `open()`, `core.episode.env_episode`): a lease goes back as
      lost (another server of the pool or of `base_urls` is leased next), a launch
      of the episode's own is stopped (the next `open()` launches another), a single
      base URL is connected to again.

    A lost session's lease goes back as lost, which takes its server out of the
    pool."""

    def __init__(
        self,
        target: EnvTarget,
        stack: contextlib.AsyncExitStack,
        *,
        on_launch: Callable[[Launcher], None] | None = None,
    ) -> None:
        self.target = target
        self._on_launch = on_launch
        """Passed to `open_env`: given the launcher of a launch of its own."""
        self._stack = stack
        self._session: contextlib.AsyncExitStack | None = None
        self._held = Held()
        self._starts_left = FRESH_STARTS
        self.leased = _leases_sessions(target)
        """Whether sessions are leased: from a pool of shared servers, or from the
        desk of `base_urls`' running servers."""

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
    reset or closed): not a timeout, nor an answer of the server's own."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
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
    """Whether `target`'s session is leased: from a pool of shared servers, or from
    the desk of the running servers of `base_urls`."""
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
    """A session on one of the pool's shared servers, its lease handed back as
    `held` says. The server creates the session as the socket opens, so a full one
    is found out by a first cheap message (`state`, bounded by the longest call's
    timeout: building an env can be slow); that lease goes back as `rejected` and
    the pool finds (or launches) another. An error of the env's own in answer still
    means the session exists. A server that cannot be connected to, or that drops
    the first request's connection, goes back as `unreachable` (the pool takes it
    out, and replaces it if it is down), and the next one is tried, a few times at
    most."""
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
                # The pool learns the server's limit from this and finds (or
                # launches) room elsewhere, waiting if it must.
                rejected = lease
                continue
            await pool.confirm(lease)
            stack.push_async_exit(session.pop_all())
            return client
    raise EnvFailure(f"the {_servers_named(target)} servers kept refusing sessions")


async def _session_taken(target: EnvTarget, client: Any, url: str) -> bool:
    """Whether the shared server at `url` kept `client`'s session: False when it
    answered the first request `CAPACITY_REACHED`. Raises `EnvFailure` when it did
    not answer in time, or failed otherwise than with an error frame."""
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
