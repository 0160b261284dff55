"""Configuration of an OpenEnv taskset on verifiers 0.4: which env, how it is
reached, which resets, and the limits of an episode, all under `--env.taskset.*`.

    vf-eval openenv-v1 --env.taskset.env openenv/echo-env
    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000
    class MyEnvConfig(OpenEnvConfig): env: str | None = "org/my-env"

Every setting is declared once, in `openenv_v1.settings`, for both lines, and keeps
its verifiers 0.2 name; there the per-rollout ones (`EpisodeSettings`) sit under
`--taskset.task.user.*`, here the env runs in the eval process, so they are the
taskset's own. `env` or `base_url` is required, but only once the config is final:
`vf-eval` builds `OpenEnvConfig(id=...)` before it reads any flag, so the requirement
is checked by `require_target()`, when the taskset is built.
"""

from __future__ import annotations

import verifiers.v1 as vf

from openenv_v1.settings import EpisodeSettings, TasksetSettings
from openenv_v1.vf04.flags import VF_EVAL_FLAGS


class OpenEnvConfig(TasksetSettings, EpisodeSettings, vf.TasksetConfig):
    """An OpenEnv environment as a finite taskset: one task per entry of `resets`, or
    the env's own tasks (OpenEnv's Task API; see `openenv_v1.settings.TaskSettings`).
    Every setting is one both lines share (`openenv_v1.settings`)."""

    surface = VF_EVAL_FLAGS  # its messages name a setting as `vf-eval` sets it


class OpenEnvEnvConfig(vf.EnvConfig):
    """The env of an OpenEnv taskset: one role, the `player`, whose replies are the
    env's actions. It runs where the eval runs: no sandbox unless asked
    (`--env.player.runtime.type prime`)."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The model under evaluation, with this package's in-process chat harness
    unless `--env.player.harness.id` pins another."""
