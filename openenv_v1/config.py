"""Configuration of an OpenEnv taskset: which env, how it is reached, which resets.

    eval openenv-v1 --taskset.env openenv/echo-env
    eval openenv-v1 --taskset.base-url http://127.0.0.1:8000
    class MyEnvConfig(OpenEnvConfig): env: str | None = "org/my-env"

`env` or `base_url` is required, but only once the config is final: verifiers' CLI
builds `OpenEnvConfig(id=...)` before it reads any flag, so the requirement is checked
by `require_target()`, which the taskset calls when it is built.
"""

from __future__ import annotations

import os
from typing import Any, Self

import verifiers.v1 as vf
from pydantic import Field, model_validator

from openenv_v1.core import EpisodeLimits


class OpenEnvUserConfig(vf.UserConfig):
    """Placement and limits of the per-rollout user simulator that drives the env."""

    provider_kwargs: dict[str, Any] = {}
    """Passed to OpenEnv's `GenericEnvClient.from_env`: `app`, `project_path`,
    `env_vars`, `port`, `workers`, `host` (default 127.0.0.1), `reload`,
    `context_timeout_s`, or for Docker `tag` and the like. Unused with `base_url`."""
    launch_timeout_s: float = 120.0
    """Seconds a launched server may take to answer `/health` (UV provider's
    `context_timeout_s` unless provider_kwargs sets it)."""
    connect_timeout_s: float = 10.0
    """Seconds to open the WebSocket session."""
    reset_timeout_s: float = 60.0
    """Seconds `reset` may take."""
    step_timeout_s: float = 60.0
    """Seconds one `step` may take; a slower step ends the rollout with an error."""
    max_invalid_actions: int = Field(3, ge=1)
    """Consecutive invalid actions (unparseable, against the schema, rejected by the
    server) that end the episode with stop condition `openenv_invalid_actions`."""
    capacity_wait_s: float = 30.0
    """Seconds to retry, with backoff, a server that is at its session limit."""

    @model_validator(mode="after")
    def _absolute_project_path(self) -> Self:
        # The user process runs in its own working directory, so a relative path must
        # be resolved here, where the user wrote it.
        path = self.provider_kwargs.get("project_path")
        if isinstance(path, str) and path and not path.startswith("git+"):
            self.provider_kwargs["project_path"] = os.path.abspath(
                os.path.expanduser(path)
            )
        return self

    def limits(self) -> EpisodeLimits:
        return EpisodeLimits(
            reset_timeout_s=self.reset_timeout_s,
            step_timeout_s=self.step_timeout_s,
            max_invalid_actions=self.max_invalid_actions,
            capacity_wait_s=self.capacity_wait_s,
        )


class OpenEnvTaskConfig(vf.TaskConfig):
    user: OpenEnvUserConfig = Field(default_factory=OpenEnvUserConfig)
    """The OpenEnv user simulator, under `--taskset.task.user.*`."""


class OpenEnvConfig(vf.TasksetConfig):
    """An OpenEnv environment as a finite taskset: one task per entry of `resets`."""

    env: str | None = None
    """OpenEnv environment id (e.g. `openenv/wordle`), launched per rollout with the UV
    provider (or Docker with `use_docker`). Required unless `base_url` is set."""
    base_url: str | None = None
    """URL of a running OpenEnv server. Connect only: nothing is cloned or launched, and
    `env`, `use_docker` and provider settings are ignored."""
    use_docker: bool = False
    """Launch with OpenEnv's Docker provider instead of UV. The user then runs on its
    own Prime VM (`colocated` off, `vm` on). Not with `base_url`."""
    resets: list[dict[str, Any]] = Field(default_factory=lambda: [{}])
    """One task per entry, each passed to OpenEnv's `reset(**kwargs)`."""
    task: OpenEnvTaskConfig = Field(default_factory=OpenEnvTaskConfig)
    """Per-task settings, under `--taskset.task.*`."""

    @model_validator(mode="after")
    def _place_docker_user(self) -> Self:
        if self.base_url and self.use_docker:
            raise ValueError(
                "use_docker launches a server, but base_url connects to a running one: "
                "drop --taskset.use-docker, or drop --taskset.base-url"
            )
        if self.use_docker:
            # Docker needs its own daemon: run it in a VM, never nested in a container.
            user = self.task.user
            user.colocated = False
            if isinstance(user.runtime, vf.PrimeConfig):
                user.runtime = user.runtime.model_copy(update={"vm": True})
            else:
                user.runtime = vf.PrimeConfig(vm=True)
        if not self.resets:
            raise ValueError("resets is empty: give at least one reset, e.g. [{}]")
        return self

    def require_target(self) -> None:
        """Fail, naming the flags, when neither `env` nor `base_url` is set."""
        if not self.env and not self.base_url:
            raise ValueError(
                f"taskset {self.id or 'openenv-v1'!r} needs an environment: pass "
                "--taskset.env <org/name> (launched with UV) or --taskset.base-url "
                "<http://host:port> (a running server), or set `env` / `base_url` "
                "under [taskset] in the config file"
            )
