"""Tasks of an OpenEnv taskset on verifiers 0.4: one per entry of `resets`, or the
env's own (OpenEnv's Task API, when `resets` is unset and the server offers it).

    taskset = OpenEnvTaskset(OpenEnvConfig(env="openenv/wordle", resets=[{"seed": 1}]))
    tasks = list(taskset)   # one OpenEnvTask per reset, name "openenv/wordle#0"
    OpenEnvConfig(base_url=url, split="test")   # tasks "test#0", "test#1", ...

A task carries what its episode needs: where the env comes from and the reset's
keyword arguments. `prompt` is None: the env (`OpenEnvEnv`) opens the conversation
with the reset observation. Its `key` (what `--resume` matches) is what the task is:
the env and its reset kwargs, or split and index (`openenv_v1.core.tasks.task_key`),
never its position. The env's tasks are listed from `base_url`, or else from a
launch of the env for the listing only (the shared servers start later, in the
env's `start()`): one more server start per eval.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from openenv_v1.core.episode.env_episode import warn_unknown_reset_kwargs
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.plan import check_launcher
from openenv_v1.core.launch.server_env import hide_this_process, use_server_home
from openenv_v1.core.manifest import ManifestError, read_manifest
from openenv_v1.core.setting_names import render_settings
from openenv_v1.core.tasks import task_key, taskset_tasks
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
    key: str = ""
    """What the task is (`openenv_v1.core.tasks.task_key`), not its position."""
    seed: int | None = None
    """The seed every rollout of the task resets with, when `reset` has none."""
    env_task: Any = None
    """The env's own spec of the task (Task API): for the trace, never the model."""


class OpenEnvTask(vf.Task[OpenEnvData]):
    @property
    def key(self) -> str:
        """What the task is, so a reordered or extended `resets` list resumes."""
        return self.data.key or super().key

    @property
    def hash(self) -> str:
        """The task's content without its position (`idx` and the name's `#idx`,
        which verifiers' content hash would include): verifiers 0.4.0's `--resume`
        matches saved episodes to tasks by this hash."""
        if not self.data.key:
            return super().hash
        data = self.data.model_dump(mode="json", exclude_none=True)
        data.pop("idx", None)
        data.pop("name", None)
        return task_key(self.data.key, data)


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvConfig]):
    """One task per reset; fails at once, naming the flags, without an env."""

    def __init__(self, config: OpenEnvConfig) -> None:
        config.require_target()
        if not config.base_url:
            try:
                manifest = read_manifest(config.provider_kwargs.get("project_path"))
            except ManifestError as e:
                raise ValueError(str(e)) from None
            config = config.with_manifest(manifest, "--env.taskset.forward-env")
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
            raise ValueError(render_settings(str(e), "vf04")) from None
        # Checked once here, not per rollout: unknown reset keys only warn.
        warn_unknown_reset_kwargs(target, config.resets or [])

    def load(self) -> Iterator[OpenEnvTask]:
        config = self.config
        source = config.base_url or config.env
        try:
            planned, _ = taskset_tasks(config, source, config.target())
        except EnvFailure as e:
            raise ValueError(render_settings(str(e), "vf04")) from None
        for plan in planned:
            yield OpenEnvTask(
                OpenEnvData(
                    name=plan.name,
                    prompt=None,
                    env=None if config.base_url else config.env,
                    base_url=config.base_url,
                    use_docker=bool(config.use_docker and not config.base_url),
                    provider=None if config.base_url else config.provider,
                    reset=plan.reset,
                    key=plan.key,
                    seed=plan.seed,
                    env_task=plan.env_task,
                ),
                config.task,
            )
