"""Configuration of an OpenEnv taskset on verifiers 0.4: which env, how it is
reached, which resets, and the limits of an episode, all under `--env.taskset.*`.

    vf-eval openenv-v1 --env.taskset.env openenv/echo-env
    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000
    class MyEnvConfig(OpenEnvConfig): env: str | None = "org/my-env"

The settings keep the names they have on verifiers 0.2, where the per-rollout ones
(`openenv_v1.settings.EpisodeSettings`) sit under `--taskset.task.user.*`; here the
env runs in the eval process, so they are the taskset's own. `env` or `base_url` is
required, but only once the config is final: `vf-eval` builds `OpenEnvConfig(id=...)`
before it reads any flag, so the requirement is checked by `require_target()`, when
the taskset is built.
"""

from __future__ import annotations

import os
from typing import Self

import verifiers.v1 as vf
from pydantic import Field, model_validator

from openenv_v1.core import EnvTarget
from openenv_v1.core.episode.env_episode import ToolCalls
from openenv_v1.core.launch.leases import PoolLeases
from openenv_v1.core.launch.plan import ProviderName
from openenv_v1.settings import EpisodeSettings, TaskSettings


class OpenEnvConfig(EpisodeSettings, TaskSettings, vf.TasksetConfig):
    """An OpenEnv environment as a finite taskset: one task per entry of `resets`, or
    the env's own tasks (OpenEnv's Task API; see `openenv_v1.settings.TaskSettings`)."""

    env: str | None = None
    """OpenEnv environment id (e.g. `openenv/wordle`), launched with the UV provider
    (shared by rollouts, see `shared_servers`) or per rollout with Docker
    (`use_docker`). Required unless `base_url` is set."""
    base_url: str | None = None
    """URL of a running OpenEnv server. Connect only: nothing is cloned or launched,
    and `env`, `use_docker` and provider settings are ignored."""
    provider: ProviderName | None = None
    """Where env servers run, with that place's options in `provider_kwargs`: `uv`
    (OpenEnv's UV provider on this host), `docker` (the same as `use_docker`), `swarm`
    (a Docker Swarm service), or a cloud sandbox of OpenEnv's: `daytona`, `modal`,
    `aca` (Azure Container Apps), `hf_sandbox`, `novita` (their SDK must be installed;
    see docs/providers.md). Unset: UV, or Docker with `use_docker`. Servers of any
    provider are shared like UV ones (`shared_servers`). Not with `base_url`."""
    use_docker: bool = False
    """Launch the env in a Docker container on this host instead of with UV: the
    image in `provider_kwargs.image`, else one built from
    `provider_kwargs.project_path`'s Dockerfile, else the Space's image. Containers are
    shared like UV servers (`shared_servers`). Not with `base_url`."""
    tool_calls: ToolCalls = "text"
    """How the model acts. `text`: each reply is an action written as JSON (or bare
    text), for any model. `native`: the env's MCP tools (for other envs, one `act`
    tool taking the action) become the model's own tools and each tool call is one
    step; for models trained to call tools. Native runs in this package's chat
    harness (the default player harness)."""
    shared_servers: bool = True
    """Launch `env` once per eval and let rollouts share it, each on its own session
    (more servers are launched while all are at their session limit). Applies to
    every provider (UV, Docker and the others); off, each rollout launches its own."""
    sessions_per_server: int | None = Field(None, ge=1)
    """Session limit of one shared server; unset, it is learned from the server's
    `CAPACITY_REACHED` answers."""
    max_servers: int | None = Field(None, ge=1)
    """Most shared servers launched at once; unset, while all are full the pool
    launches as many as the waiting rollouts need, as long as the host keeps 1 GiB (or
    twice the largest server's memory) free. An env without concurrent sessions gets
    a server per concurrent rollout, reused by later ones."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        from openenv_v1.core.launch.plan import settle_use_docker

        self.use_docker = settle_use_docker(
            self.provider,
            use_docker=self.use_docker,
            base_url=self.base_url,
            flags="--env.taskset.",
        )
        return self

    def require_target(self) -> None:
        """Fail, naming the flags, when neither `env` nor `base_url` is set."""
        if not self.env and not self.base_url:
            raise ValueError(
                f"taskset {self.id or 'openenv-v1'!r} needs an environment: pass "
                "--env.taskset.env <org/name> (launched with UV) or "
                "--env.taskset.base-url <http://host:port> (a running server), or set "
                "`env` / `base_url` under [env.taskset] in the config file"
            )

    def shares_servers(self) -> bool:
        """Whether rollouts lease shared servers (UV or Docker) launched once per
        eval."""
        return bool(self.shared_servers and self.env and not self.base_url)

    def forwarded_values(self) -> dict[str, str]:
        """Values of `forward_env` in this process; a missing one is an error naming
        it."""
        missing = [name for name in self.forward_env if name not in os.environ]
        if missing:
            raise ValueError(
                f"forward_env names {', '.join(missing)}, not set in the eval's "
                "environment: export it, or drop it from --env.taskset.forward-env"
            )
        return {name: os.environ[name] for name in self.forward_env}

    def target(self, *, pool: PoolLeases | None = None) -> EnvTarget:
        """Where an episode's env comes from: `base_url`, a lease from the shared
        servers' `pool`, or a launch of `env` of its own."""
        return EnvTarget(
            env=None if self.base_url else self.env,
            base_url=self.base_url,
            use_docker=bool(self.use_docker and not self.base_url),
            provider=None if self.base_url else self.provider,
            provider_kwargs=self.provider_kwargs,
            secret_env=self.forwarded_values() if not self.base_url else {},
            pool=None if self.base_url else pool,
            launch_timeout_s=self.launch_timeout_s,
            connect_timeout_s=self.connect_timeout_s,
            message_timeout_s=self.message_timeout_s(),
            web_ui=self.server_web_ui,
            cache_max_gb=self.cache_max_gb,
        )


class OpenEnvEnvConfig(vf.EnvConfig):
    """The env of an OpenEnv taskset: one role, the `player`, whose replies are the
    env's actions. It runs where the eval runs: no sandbox unless asked
    (`--env.player.runtime.type prime`)."""

    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The model under evaluation, with this package's in-process chat harness
    unless `--env.player.harness.id` pins another."""
