"""verifiers 0.4's taskset config: every setting is a shared one
(`openenv_v1.settings`), all the taskset's own under `--env.taskset.*`, with its
verifiers 0.2 name (the env runs in the eval process: no user simulator).

    vf-eval openenv-v1 --env.taskset.env openenv/echo-env
    class MyEnvConfig(OpenEnvConfig): env: str | None = "org/my-env"
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
