"""The taskset core both verifiers bindings compose: what an OpenEnv taskset builds
from its settings, written once; each binding maps it onto verifiers. verifiers is
imported only for the two types its lines define alike (`vf.TaskData`,
`vf.UserMessage`).

    prepare_eval_process(episode.server_home)   # the process-wide settings, by name
    core = TasksetCore.build(config, episode)   # messages spelled as config.surface
    pool = core.start_pool() if config.leases_servers() else None
    tasks = [Task(data, ...) for data in core.task_data()]   # one OpenEnvData each
    episode, opening = await open_and_reset(core.target, episode_settings, stack, data)
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.core.episode.env_episode import (
    open_episode,
    warn_unknown_reset_kwargs,
)
from openenv_v1.core.episode.env_source import env_source_dir
from openenv_v1.core.episode.report import ToolCalls
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.env_project import explain_lacking, passed_variables
from openenv_v1.core.launch.env_target import EnvTarget
from openenv_v1.core.launch.plan import check_launcher
from openenv_v1.core.launch.server_env import hide_this_process, use_server_home
from openenv_v1.core.manifest import ManifestError, read_manifest
from openenv_v1.core.setting_names import Surface, render_settings
from openenv_v1.core.tasks import reset_kwargs, taskset_tasks
from openenv_v1.logs import route_to_verifiers
from openenv_v1.settings import (
    EpisodeSettings,
    TasksetSettings,
    env_target,
    forwarded_values,
)

if TYPE_CHECKING:
    from openenv_v1.core.episode.env_episode import EnvEpisode
    from openenv_v1.core.episode.turns import Turn
    from openenv_v1.core.launch.pool import ServerPool
    from openenv_v1.core.launch.url_pool import UrlPool

logger = logging.getLogger(__name__)


class OpenEnvData(vf.TaskData):
    env: str | None
    """OpenEnv environment id to launch (None when connecting to `base_url`)."""
    base_url: str | list[str] | None
    """The running server, or the list of them, that `base_url` gives."""
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
    tool_calls: ToolCalls = "text"
    """How the model acts: replies written as text, or native tool calls."""


def prepare_eval_process(server_home: str | None) -> None:
    """Settle what is process-wide where an OpenEnv taskset is built (each binding's
    taskset calls it): `openenv_v1.*` logs go where verifiers sends its own, the
    process is hidden from other processes of its user (it holds API keys and the
    pool's token), and the HOME of the UV servers it launches is settled."""
    route_to_verifiers()
    hide_this_process()
    use_server_home(server_home)


@dataclass(frozen=True)
class TasksetCore:
    """What a taskset builds from its settings once per process (`build`)."""

    settings: TasksetSettings
    episode: EpisodeSettings
    """The episode settings, with the defaults the env's `openenv.yaml` declares."""
    target: EnvTarget
    """Where the env comes from, without a pool (a taskset's own use: the launcher
    check, the task listing, the pool's launches)."""
    secret_env: dict[str, str] = field(repr=False)
    """The values of `forward_env` (none with `base_url`)."""
    surface: Surface
    """How the line the taskset is on spells the settings its messages name (the
    binding's `flags.py`)."""

    @classmethod
    def build(cls, settings: TasksetSettings, episode: EpisodeSettings) -> TasksetCore:
        """Check `settings` and `episode` (an env is named, the env folder's
        `openenv.yaml` is valid and its credentials are forwarded, the launcher can
        be used) and build the core, with the manifest's defaults applied to
        `episode`; warns once of reset kwargs the env does not take. Every problem
        is a `ValueError` naming the setting as `settings.surface` spells it."""
        surface = settings.surface
        if surface is None:
            raise TypeError(f"{type(settings).__name__} names no surface")
        settings.require_target(getattr(settings, "id", None))
        secret_env: dict[str, str] = {}
        if not settings.base_url:
            try:
                manifest = read_manifest(episode.provider_kwargs.get("project_path"))
                episode = episode.with_manifest(manifest)
                secret_env = forwarded_values(episode.forward_env)
            except (ManifestError, ValueError) as e:
                raise ValueError(render_settings(str(e), surface)) from None
        target = env_target(settings, episode, secret_env=secret_env)
        try:
            check_launcher(target)
        except EnvFailure as e:
            raise ValueError(render_settings(str(e), surface)) from None
        # Here rather than in the rollouts: unknown reset keys only warn, once.
        warn_unknown_reset_kwargs(target, settings.resets or [])
        return cls(settings, episode, target, secret_env, surface)

    def start_pool(self) -> ServerPool | UrlPool:
        """The desk rollouts lease their sessions from (`leases_servers()`): the
        running servers of a `base_url` list (`UrlPool`), else the shared servers'
        pool (its first server comes up in the pool's own thread). Both serve leases
        with `local()` and `serve_http()`; the caller closes it."""
        from openenv_v1.core.launch.pool import ServerPool
        from openenv_v1.core.launch.url_pool import UrlPool

        if urls := self.settings.base_urls():
            return UrlPool(
                urls,
                sessions_per_server=self.settings.sessions_per_server,
                capacity_wait_s=self.episode.capacity_wait_s,
            )
        return ServerPool(
            self.target,
            sessions_per_server=self.settings.sessions_per_server,
            max_servers=self.settings.max_servers,
            capacity_wait_s=self.episode.capacity_wait_s,
        )

    def task_data(
        self, lease: Callable[[], tuple[str, Callable[[], None]]] | None = None
    ) -> Iterator[OpenEnvData]:
        """The data of each task (`openenv_v1.core.tasks.taskset_tasks`); the env's
        own tasks are listed on a shared server from `lease` when given."""
        settings = self.settings
        urls = settings.base_urls()
        # A list's tasks are named after its first server.
        source = urls[0] if urls else settings.base_url or settings.env
        try:
            planned, where = taskset_tasks(settings, source, self.target, lease)
        except EnvFailure as e:
            raise ValueError(render_settings(str(e), self.surface)) from None
        logger.info("%s: %d tasks from %s", source, where.taken, where.kind)
        for idx, plan in enumerate(planned):
            yield OpenEnvData(
                idx=idx,
                name=plan.name,
                prompt=None,
                env=self.target.env,
                base_url=list(urls) or self.target.base_url,
                use_docker=self.target.use_docker,
                provider=self.target.provider,
                reset=plan.reset,
                key=plan.key,
                seed=plan.seed,
                env_task=plan.env_task,
                tool_calls=settings.tool_calls,
            )


async def open_and_reset(
    target: EnvTarget,
    settings: EpisodeSettings,
    stack: contextlib.AsyncExitStack,
    data: OpenEnvData,
) -> tuple[EnvEpisode, Turn]:
    """Open the episode of task `data` on `target` (closed by `stack`; it redacts
    the target's forwarded values) and reset it: the episode and its opening turn.
    Raises whatever failed; the binding says so in its own terms. Its failures say
    which variables the env's own files read that the launch does not pass
    (`env_project.explain_lacking`): a reset that left no episode always, any
    other failure when it names one."""
    episode = await open_episode(
        target,
        settings.limits(),
        stack,
        observation_format=settings.observation_format,
        observation_images=settings.observation_images,
        max_observation_chars=settings.max_observation_chars,
        tool_calls=data.tool_calls,
    )

    def explain(text: str, at_reset: bool) -> str:
        # Only a failure pays for finding the env's source and what it reads.
        return explain_lacking(
            text,
            at_reset,
            source_dir=env_source_dir(target),
            passed=passed_variables(target.provider_kwargs, settings.forward_env),
        )

    episode.explain = explain
    try:
        return episode, await episode.reset(reset_kwargs(data.reset, data.seed))
    except EnvFailure as e:
        raise EnvFailure(episode.explain(str(e), False)) from e


def user_message(turn: Turn) -> vf.UserMessage:
    """The turn as a user message: its text, then its images as data-URL image parts
    (OpenAI's `image_url` content parts, which verifiers passes to the model as is)."""
    return vf.UserMessage(content=turn.chat_content())


__all__ = [
    "OpenEnvData",
    "TasksetCore",
    "open_and_reset",
    "prepare_eval_process",
    "user_message",
]
