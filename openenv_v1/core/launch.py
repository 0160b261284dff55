"""Open a connected OpenEnv client: launch with UV or Docker, or connect to a base_url.

Everything opened is registered on the caller's `AsyncExitStack`, so closing the stack
closes the WebSocket session and stops what was launched, on success, error or
cancellation alike.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from openenv_v1.core.errors import EnvFailure, describe

# Keys of `provider_kwargs` that OpenEnv hands to `provider.start()` rather than to the
# provider's constructor.
_START_KEYS = ("port", "env_vars", "workers")


@dataclass(frozen=True)
class EnvTarget:
    """Where an episode's environment comes from.

    `base_url` connects to a running server and ignores everything else. Otherwise `env`
    (an OpenEnv / Hugging Face Space id) is launched with OpenEnv's UV provider, or its
    Docker provider when `use_docker`. `provider_kwargs` go to
    `GenericEnvClient.from_env` (`app`, `project_path`, `env_vars`, `port`, ...).
    """

    env: str | None = None
    base_url: str | None = None
    use_docker: bool = False
    provider_kwargs: dict[str, Any] = field(default_factory=dict)
    launch_timeout_s: float = 120.0
    connect_timeout_s: float = 10.0

    @property
    def label(self) -> str:
        return self.base_url or self.env or "<no env>"


def http_base(url: str) -> str:
    """The HTTP base of a server URL OpenEnv may report as ws:// or wss://."""
    for ws, http in (("ws://", "http://"), ("wss://", "https://")):
        if url.startswith(ws):
            return http + url[len(ws) :]
    return url.rstrip("/")


async def open_env(target: EnvTarget, stack: contextlib.AsyncExitStack):
    """A connected `GenericEnvClient` for `target`, closed (and its server stopped) by
    `stack`. Raises `EnvFailure` naming the cause when it cannot be had."""
    from openenv import GenericEnvClient

    if target.base_url:
        client = GenericEnvClient(
            base_url=target.base_url, connect_timeout_s=target.connect_timeout_s
        )
        try:
            return await stack.enter_async_context(client)
        except Exception as e:
            raise EnvFailure(
                f"cannot connect to the OpenEnv server at {target.base_url}: {describe(e)}"
            ) from e
    if not target.env:
        raise EnvFailure("no environment: set `env` (an OpenEnv id) or `base_url`")
    kwargs = dict(target.provider_kwargs)
    try:
        if target.use_docker:
            handle = GenericEnvClient.from_env(target.env, use_docker=True, **kwargs)
        else:
            handle = GenericEnvClient.from_env(
                target.env,
                use_docker=False,
                provider=_uv_provider(target, kwargs),
                **{k: kwargs[k] for k in _START_KEYS if k in kwargs},
            )
        client = await handle
    except EnvFailure:
        raise
    except Exception as e:
        how = "Docker" if target.use_docker else "UV"
        raise EnvFailure(
            f"cannot launch {target.env} with the {how} provider: {describe(e)}"
        ) from e
    return await stack.enter_async_context(client)


def _uv_provider(target: EnvTarget, kwargs: dict[str, Any]):
    from openenv_v1.core.uv_launch import SupervisedUVProvider

    assert target.env is not None
    options = {k: v for k, v in kwargs.items() if k not in _START_KEYS}
    project_path = options.pop("project_path", None) or (
        f"git+https://huggingface.co/spaces/{target.env}"
    )
    if not project_path.startswith("git+") and not os.path.isdir(project_path):
        raise EnvFailure(
            f"project_path {project_path!r} is not a directory; set "
            "task.user.provider_kwargs.project_path to the env's source checkout"
        )
    options.setdefault("host", "127.0.0.1")
    options.setdefault("context_timeout_s", target.launch_timeout_s)
    try:
        return SupervisedUVProvider(project_path=project_path, **options)
    except TypeError as e:
        raise EnvFailure(
            f"unsupported UV provider option in task.user.provider_kwargs: {e}"
        ) from e
