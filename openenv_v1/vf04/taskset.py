"""Tasks of an OpenEnv taskset on verifiers 0.4: one per entry of `resets`.

    taskset = OpenEnvTaskset(OpenEnvConfig(env="openenv/wordle", resets=[{"seed": 1}]))
    tasks = list(taskset)   # one OpenEnvTask per reset, name "openenv/wordle#0"

A task carries what its episode needs: where the env comes from and the reset's
keyword arguments. `prompt` is None: the env (`OpenEnvEnv`) opens the conversation
with the reset observation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from openenv_v1.core.episode import warn_unknown_reset_kwargs
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launchers import check_launcher
from openenv_v1.core.server_env import hide_this_process, use_server_home
from openenv_v1.logs import route_to_verifiers
from openenv_v1.vf04.config import OpenEnvConfig


class OpenEnvData(vf.TaskData):
    env: str | None
    """OpenEnv environment id to launch (None when connecting to `base_url`)."""
    base_url: str | None
    use_docker: bool
    provider: str | None = None
    """Where a launched server runs (`OpenEnvConfig.provider`); None: UV or Docker."""
    reset: dict[str, Any]
    """Keyword arguments for the env's `reset`."""


class OpenEnvTask(vf.Task[OpenEnvData]):
    pass


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvConfig]):
    """One task per reset; fails at once, naming the flags, without an env."""

    def __init__(self, config: OpenEnvConfig) -> None:
        config.require_target()
        super().__init__(config)
        route_to_verifiers()
        # The eval runs the episodes: it holds API keys and the episodes' accounts
        # (`server_env`).
        hide_this_process()
        use_server_home(config.server_home)
        target = config.target()
        # A launcher that cannot be used (its SDK missing) fails here, not per rollout.
        try:
            check_launcher(target)
        except EnvFailure as e:
            raise ValueError(str(e)) from None
        # Checked once here, not per rollout: unknown reset keys only warn.
        warn_unknown_reset_kwargs(target, config.resets)

    def load(self) -> Iterator[OpenEnvTask]:
        config = self.config
        source = config.base_url or config.env
        for idx, reset in enumerate(config.resets):
            yield OpenEnvTask(
                OpenEnvData(
                    name=f"{source}#{idx}",
                    prompt=None,
                    env=None if config.base_url else config.env,
                    base_url=config.base_url,
                    use_docker=bool(config.use_docker and not config.base_url),
                    provider=None if config.base_url else config.provider,
                    reset=reset,
                ),
                config.task,
            )
