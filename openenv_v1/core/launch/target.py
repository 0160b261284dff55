"""Open a connected OpenEnv client: a shared server, a launch of one's own, or a base_url.

Four ways, chosen by `EnvTarget`:

- `base_url`: connect to a running server; nothing is launched.
- `pool` / `pool_url`: lease a server from a `ServerPool` (shared UV-launched
  servers), in this process or over its loopback endpoint, and open a session of
  one's own on it.
- `env`: launch a server for this episode alone with OpenEnv's UV provider (extended
  by `SupervisedUVProvider`), or with the launcher `provider` names (a container with
  `use_docker`: `DockerLaunch`; see `launchers`).

Everything opened is registered on the caller's `AsyncExitStack`, so closing the stack
closes the WebSocket session and stops (or hands back) the server, on success, error
or cancellation alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import httpx
from tenacity import (
    AsyncRetrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential_jitter,
)

from openenv_v1.core.errors import EnvFailure, describe, redact, server_error_code
from openenv_v1.core.light_import import generic_client_class
from openenv_v1.core.local_http import local_client

logger = logging.getLogger(__name__)

# Keys of `provider_kwargs` that OpenEnv hands to `provider.start()` rather than to the
# provider's constructor.
_START_KEYS = ("port", "env_vars", "workers")
# Refused sessions a rollout retries on other shared servers before giving up.
_MAX_REFUSALS = 50
# Connection failures on leased servers before the rollout gives up.
_MAX_UNREACHABLE = 3
# Sends of one lease request to a pool's HTTP endpoint before the rollout gives up.
_LEASE_SEND_ATTEMPTS = 5


@dataclass(frozen=True)
class EnvTarget:
    """Where an episode's environment comes from.

    `base_url` connects to a running server and ignores everything else; `pool`
    (a `ServerPool`'s leases in this process) or `pool_url` (its HTTP endpoint, from
    another process) leases one of the shared servers launched for `env`. Otherwise `env` (an OpenEnv /
    Hugging Face Space id) is launched for this episode by the launcher `launcher`
    names: OpenEnv's UV provider by default, Docker with `use_docker`, or the
    `provider` set (see `launchers.PROVIDERS`). `provider_kwargs` are that launcher's
    options (`app`, `project_path`, `env_vars`, `port`, `tag`, ...). `secret_env` is
    added to the launched server's environment and never shown.
    """

    env: str | None = None
    base_url: str | None = None
    use_docker: bool = False
    provider: str | None = None
    """Where the server runs (`launchers.PROVIDERS`); None: `docker` with
    `use_docker`, else `uv`."""
    provider_kwargs: Mapping[str, Any] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    pool_url: str | None = field(default=None, repr=False)
    pool: PoolLeases | None = field(default=None, repr=False, compare=False)
    launch_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0
    message_timeout_s: float = 60.0
    """OpenEnv client's own per-message limit (it raises `TimeoutError`); at least the
    episode's reset and step timeouts."""
    web_ui: bool = False
    """Let a UV-launched server import gradio (OpenEnv's web UI); hidden otherwise."""

    @property
    def label(self) -> str:
        return self.base_url or self.env or "<no env>"

    @property
    def launcher(self) -> str:
        """The name of the launcher that runs `env`: `provider`, else `docker` with
        `use_docker`, else `uv`."""
        return self.provider or ("docker" if self.use_docker else "uv")


async def open_env(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    *,
    on_launch: Callable[[Any], None] | None = None,
) -> Any:
    """A connected `GenericEnvClient` for `target`, closed (and its server stopped or
    handed back) by `stack`. Raises `EnvFailure` naming the cause when it cannot be
    had. `on_launch` is given the launcher of a launch of its own once the server is
    ready: a UV launch's `SupervisedUVProvider` (which app it serves, and why), a Docker
    launch's `DockerLaunch` (its image, build and container)."""
    if target.base_url:
        return await _connect(target, target.base_url, stack, what="the OpenEnv server")
    if target.pool is not None or target.pool_url:
        return await _open_leased(target, stack)
    if not target.env:
        raise EnvFailure("no environment: set `env` (an OpenEnv id) or `base_url`")
    if target.launcher != "uv":
        return await _open_launched(target, stack, on_launch)
    return await _open_uv(target, stack, on_launch)


def uv_launch_plan(target: EnvTarget) -> tuple[Any, dict[str, Any]]:
    """The `SupervisedUVProvider` for `target` and the keyword arguments of its
    `start()`. Raises `EnvFailure` for a bad `project_path` or provider option."""
    from openenv_v1.core.launch.uv import SupervisedUVProvider

    assert target.env is not None
    kwargs, start_args = _split_start_args(target, _START_KEYS)
    project_path = kwargs.pop("project_path", None) or (
        f"git+https://huggingface.co/spaces/{target.env}"
    )
    if not project_path.startswith("git+") and not os.path.isdir(project_path):
        raise EnvFailure(
            f"project_path {project_path!r} is not a directory; set "
            "task.user.provider_kwargs.project_path to the env's source checkout"
        )
    kwargs.setdefault("host", "127.0.0.1")
    kwargs.setdefault("context_timeout_s", target.launch_timeout_s)
    kwargs.setdefault("web_ui", target.web_ui)
    try:
        provider = SupervisedUVProvider(project_path=project_path, **kwargs)
    except TypeError as e:
        raise EnvFailure(
            f"unsupported UV provider option in task.user.provider_kwargs: {e}"
        ) from e
    return provider, start_args


def _split_start_args(
    target: EnvTarget, start_keys: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`provider_kwargs` split into the provider's own options and the keyword
    arguments of its start call (`start_keys`), with `secret_env` added to the
    server's `env_vars`."""
    kwargs = dict(target.provider_kwargs)
    start_args = {k: kwargs.pop(k) for k in start_keys if k in kwargs}
    if target.secret_env:
        start_args["env_vars"] = {**start_args.get("env_vars", {}), **target.secret_env}
    return kwargs, start_args


def uv_launch_failure(target: EnvTarget, exc: Exception) -> EnvFailure:
    """The failure of a UV launch of `target`, naming the cause: an `EnvFailure`'s
    own text (e.g. the server's output tail), or the exception described."""
    cause = str(exc) if isinstance(exc, EnvFailure) else describe(exc)
    return EnvFailure(f"cannot launch {target.env} with the UV provider: {cause}")


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
        raise EnvFailure(f"cannot connect to {what} at {url}: {describe(e)}") from e


async def _open_uv(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    on_launch: Callable[[Any], None] | None,
) -> Any:
    """Launch a server for this episode alone. `start()` runs on the calling thread,
    which the server's parent-death signal is tied to, and so does the relaunch of a
    next app candidate; readiness is awaited off the event loop."""
    provider, start_args = uv_launch_plan(target)
    provider.run_on_owner = anyio.from_thread.run_sync
    stack.callback(provider.stop)
    try:
        provider.start(**start_args)
        # Abandoned on cancellation: the stack's `stop` then ends the server, and
        # with it the wait.
        url = await anyio.to_thread.run_sync(
            provider.wait_for_ready, abandon_on_cancel=True
        )
    except Exception as e:
        # Its output tail may echo the server's environment.
        failure = str(uv_launch_failure(target, e))
        raise EnvFailure(redact(failure, target.secret_env.values())) from None
    if on_launch is not None:
        on_launch(provider)
    return await _connect(target, url, stack, what=f"the launched {target.env} server")


async def _open_launched(
    target: EnvTarget,
    stack: contextlib.AsyncExitStack,
    on_launch: Callable[[Any], None] | None,
) -> Any:
    """Run a server for this episode alone with the launcher `target.launcher` names
    (`launchers.launch_plan`: Docker's container, a Swarm service, a cloud sandbox).
    Their calls block (a build, `docker run`, an SDK's requests, the readiness wait),
    so they run off the event loop; on cancellation they are abandoned and the
    stack's `stop` ends what was started (a start still under way ends its own once
    it returns). A failure names the launcher, with secret values redacted.
    `on_launch` gets the launcher once its server is ready (`check` reports it)."""
    from openenv_v1.core.launch.plan import launch_plan, launcher_label

    try:
        provider, start_args = launch_plan(target)
    except Exception as e:
        raise _redacted_failure(target, e) from None
    stack.push_async_callback(anyio.to_thread.run_sync, provider.stop)
    try:
        url = await anyio.to_thread.run_sync(
            functools.partial(provider.start, **start_args), abandon_on_cancel=True
        )
        ready = await anyio.to_thread.run_sync(
            provider.wait_for_ready, abandon_on_cancel=True
        )
        url = ready or url
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
    from openenv_v1.core.launch.plan import launch_failure

    failure = launch_failure(target, exc)
    return EnvFailure(redact(str(failure), target.secret_env.values()))


async def _open_leased(target: EnvTarget, stack: contextlib.AsyncExitStack) -> Any:
    """A session on one of the pool's shared servers. The server creates the session
    as the socket opens, so a full one is found out by a first cheap message (`state`,
    bounded by the longest call's timeout: building an env can be slow); that lease
    goes back as `rejected` and the pool finds (or launches) another. An error of the
    env's own in answer still means the session exists. A server that cannot be
    connected to goes back as `unreachable` (the pool replaces it if it is down), and
    the next one is tried, a few times at most."""
    pool: PoolLeases
    if target.pool is not None:
        pool = target.pool
    else:
        assert target.pool_url is not None
        pool = _PoolClient(target.pool_url)
    rejected: str | None = None
    unreachable: str | None = None
    unreachable_left = _MAX_UNREACHABLE
    for _ in range(_MAX_REFUSALS):
        lease, url = await pool.lease(rejected=rejected, unreachable=unreachable)
        rejected = unreachable = None
        async with contextlib.AsyncExitStack() as session:
            session.push_async_callback(pool.release, lease)
            try:
                client = await _connect(
                    target, url, session, what=f"the shared {target.env} server"
                )
            except EnvFailure:
                unreachable_left -= 1
                if unreachable_left <= 0:
                    raise
                session.pop_all()  # the lease goes back as `unreachable` instead
                unreachable = lease
                continue
            try:
                # The server builds the session's env as the socket opens, and some
                # envs are slow to build: the probe gets the longest call's time.
                await asyncio.wait_for(client.state(), target.message_timeout_s)
            except TimeoutError as e:
                raise EnvFailure(
                    f"the shared {target.env} server at {url} did not answer a first "
                    f"request within {target.message_timeout_s:.0f}s (building the "
                    "env for a new session may be that slow: raise "
                    "task.user.reset_timeout_s)"
                ) from e
            except Exception as e:
                code = server_error_code(e)
                if code is None:
                    raise EnvFailure(
                        f"the shared {target.env} server at {url} failed a first "
                        f"request: {describe(e)}"
                    ) from e
                if code == "CAPACITY_REACHED":
                    session.pop_all()  # the lease goes back as `rejected` instead
                    await client.close()
                    # The pool learns the server's limit from this and finds (or
                    # launches) room elsewhere, waiting if it must.
                    rejected = lease
                    continue
                # Any other error frame is the env's own (some envs refuse `state`
                # before a reset): the session exists.
            await pool.confirm(lease)
            stack.push_async_exit(session.pop_all())
            return client
    raise EnvFailure(f"the shared {target.env} servers kept refusing sessions")


class PoolLeases(Protocol):
    """Where a rollout leases a shared server: a `ServerPool`'s `local()` leases, or
    `_PoolClient` over its HTTP endpoint."""

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]: ...

    async def confirm(self, lease: str) -> None:
        """The server accepted the leased session."""

    async def release(self, lease: str) -> None: ...


class _PoolClient:
    """The rollout side of a `ServerPool`'s lease endpoint. A request the endpoint
    could not take (a reset or refused connection in a burst) is sent again, a few
    times with backoff; the pool's answers themselves are not retried."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def lease(
        self, *, rejected: str | None, unreachable: str | None
    ) -> tuple[str, str]:
        body = {"pid": os.getpid(), "rejected": rejected, "unreachable": unreachable}
        try:
            # The pool answers once a server is up or the wait is over: no timeout.
            async with local_client(self.url, None) as http:
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception_type(httpx.TransportError),
                    stop=stop_after_attempt(_LEASE_SEND_ATTEMPTS),
                    wait=wait_exponential_jitter(multiplier=0.05, max=2.0),
                    reraise=True,
                ):
                    with attempt:
                        response = await http.post("/lease", json=body)
            reply = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise EnvFailure(
                f"the shared env server pool is unreachable: {describe(e)}"
            ) from e
        if response.status_code != 200:
            raise EnvFailure(reply.get("error") or f"HTTP {response.status_code}")
        return reply["lease"], reply["url"]

    async def confirm(self, lease: str) -> None:
        await self._tell("confirm", lease)

    async def release(self, lease: str) -> None:
        await self._tell("release", lease)

    async def _tell(self, action: str, lease: str) -> None:
        """A notice the rollout need not wait on the answer of (a lost one is made
        up for by the pool: a dead process's leases are reclaimed)."""
        with contextlib.suppress(httpx.HTTPError):
            async with local_client(self.url, 5.0) as http:
                await http.post(f"/{action}", json={"lease": lease})
