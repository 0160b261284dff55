"""verifiers 0.2's taskset config: the shared settings (`openenv_v1.settings`: the
taskset's `EnvSettings` and `TaskSettings`, the user simulator's `EpisodeSettings`),
and this line's own: where the user simulator runs and how it starts.

    eval openenv-v1 --taskset.env openenv/echo-env
    eval openenv-v1 --taskset.base-url http://127.0.0.1:8000
    class MyEnvConfig(OpenEnvConfig): env: str | None = "org/my-env"
"""

from __future__ import annotations

from typing import Self

import verifiers.v1 as vf
from pydantic import Field, model_validator

from openenv_v1.settings import EpisodeSettings, TasksetSettings
from openenv_v1.vf02.flags import EVAL_FLAGS


class OpenEnvUserConfig(EpisodeSettings, vf.UserConfig):
    """Placement and limits of the per-rollout user simulator that drives the env
    (the episode settings of `openenv_v1.settings`, under `--taskset.task.user.*`)."""

    pool_url: str | None = None
    """Set by the taskset, not by hand: lease endpoint of its shared env servers."""
    simulator_forks: str | None = None
    """Set by the taskset, not by hand: socket of its simulator fork server
    (`openenv_v1.vf02.simulator.forks`)."""
    simulator_forks_token: str | None = Field(None, repr=False)
    """Set by the taskset, not by hand: what the fork server asks of a launcher."""
    secret_env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Set by the taskset, not by hand: values of `forward_env` for a rollout that
    launches its own server. Never part of a saved config."""


class OpenEnvTaskConfig(vf.TaskConfig):
    user: OpenEnvUserConfig = Field(default_factory=OpenEnvUserConfig)
    """The OpenEnv user simulator, under `--taskset.task.user.*`."""


class OpenEnvConfig(TasksetSettings, vf.TasksetConfig):
    """An OpenEnv environment as a finite taskset: one task per entry of `resets`, or
    the env's own tasks (OpenEnv's Task API; see `openenv_v1.settings.TaskSettings`).
    Which env and where it runs are `openenv_v1.settings.EnvSettings`; the settings
    below are this line's own (its user simulators)."""

    docker_on_host: bool = False
    """With `use_docker`: run the containers with this host's Docker engine, the user
    simulator staying in its runtime on this host (which must be local), and
    containers shared like UV servers (`shared_servers`). Off, the user gets a Prime
    VM of its own, with Docker there."""
    max_simulators: int | None = Field(None, ge=1)
    """Most user simulators (one process per rollout, ~100 MB each) alive at once in
    the process that runs the rollouts; rollouts past it wait for one to end. Unset:
    32 per core for forked simulators (16 per core for fresh ones), within half this
    machine's memory. Applies when the simulator runs on this host. For more in
    flight, use verifiers 0.4 (no simulator process)."""
    simulator_starts: int | None = Field(None, ge=1)
    """Most user simulators starting at once (a start is CPU-bound, and verifiers
    gives it 180 s to report its port). Unset: 8 per core for forked simulators
    (~0.7 s of CPU each), two per core for fresh ones (~3 s)."""
    fork_simulators: bool = True
    """Start each user simulator as a fork of one process that has imported
    verifiers once (a fraction of a second of CPU per rollout instead of a few
    seconds). Off: each simulator is a fresh interpreter. Linux, simulator on this
    host."""
    task: OpenEnvTaskConfig = Field(default_factory=OpenEnvTaskConfig)
    """Per-task settings, under `--taskset.task.*`."""

    surface = EVAL_FLAGS  # its messages name a setting as `eval` sets it

    @model_validator(mode="after")
    def _place_docker_user(self) -> Self:
        # After `EnvSettings` has settled `use_docker` (a base's validators run first).
        if self.docker_on_host:
            self._require_docker_on_host()
        elif self.use_docker:
            # Docker needs its own daemon: run it in a VM, never nested in a container.
            user = self.task.user
            user.colocated = False
            if isinstance(user.runtime, vf.PrimeConfig):
                user.runtime = user.runtime.model_copy(update={"vm": True})
            else:
                user.runtime = vf.PrimeConfig(vm=True)
        if self.tool_calls == "native":
            self._require_local_user()
        return self

    def _user_here(self) -> bool:
        """Whether the user simulator runs on this host: not colocated, in a local
        runtime."""
        from verifiers.v1.runtimes import runtime_is_local

        user = self.task.user
        return not user.colocated and runtime_is_local(user.runtime)

    def _require_docker_on_host(self) -> None:
        if not self.use_docker:
            raise ValueError(
                "docker_on_host places Docker launches, but use_docker is off: add "
                "--taskset.use-docker true, or drop --taskset.docker-on-host"
            )
        if not self._user_here():
            raise ValueError(
                "docker_on_host runs the user simulator on this host beside its Docker "
                "engine, but task.user places it elsewhere (colocated, or a "
                "non-local runtime): drop those task.user settings, or drop "
                "--taskset.docker-on-host to run Docker on a Prime VM"
            )

    def _require_local_user(self) -> None:
        on_vm = self.use_docker and not self.docker_on_host
        if on_vm or not self._user_here():
            where = "on a Prime VM (use_docker)" if on_vm else "off this host"
            raise ValueError(
                "tool_calls native needs the user simulator on this host: it keeps the "
                "env session, and the eval's tool server forwards each tool call to it "
                f"over loopback, but here it runs {where}. Use --taskset.tool-calls "
                "text, or run the env yourself and pass --taskset.base-url"
            )

    def shares_servers(self) -> bool:
        """Whether rollouts lease shared servers launched by the taskset: UV launches,
        or Docker ones on this host (`docker_on_host`), whose user simulator runs on
        this host (so it reaches 127.0.0.1)."""
        return bool(
            super().shares_servers()
            and (not self.use_docker or self.docker_on_host)
            and self._user_here()
        )

    def leases_servers(self) -> bool:
        """Whether the taskset starts the desk its rollouts lease sessions from over
        its endpoint: the shared servers (`shares_servers`), or a `base_url` list's
        servers when the user simulator runs on this host (one elsewhere leases
        them from a desk of its own)."""
        return self.shares_servers() or bool(self.base_urls() and self._user_here())

    def gates_simulators(self) -> bool:
        """Whether the user simulators run on this host, where they share its memory
        and CPU (see `openenv_v1.vf02.simulator.slots`)."""
        from verifiers.v1.runtimes import runtime_is_local

        return runtime_is_local(self.task.user.runtime)

    def forks_simulators_here(self) -> bool:
        """Whether the user simulators start as processes of this host, where they
        can be forked (`openenv_v1.vf02.simulator.forks`)."""
        from openenv_v1.vf02.simulator.forks import supported

        user = self.task.user
        return supported() and user.runtime.type == "subprocess"
