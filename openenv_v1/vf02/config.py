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
from typing import Self

import verifiers.v1 as vf
from pydantic import Field, model_validator

from openenv_v1.core.episode.report import ToolCalls
from openenv_v1.core.launch.plan import ProviderName
from openenv_v1.settings import EpisodeSettings, TaskSettings


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


class OpenEnvConfig(TaskSettings, vf.TasksetConfig):
    """An OpenEnv environment as a finite taskset: one task per entry of `resets`, or
    the env's own tasks (OpenEnv's Task API; see `openenv_v1.settings.TaskSettings`)."""

    env: str | None = None
    """OpenEnv environment id (e.g. `openenv/wordle`), launched with the UV provider
    (shared by rollouts, see `shared_servers`) or per rollout with Docker
    (`use_docker`). Required unless `base_url` is set."""
    base_url: str | None = None
    """URL of a running OpenEnv server. Connect only: nothing is cloned or launched, and
    `env`, `use_docker` and provider settings are ignored."""
    provider: ProviderName | None = None
    """Where env servers run, with that place's options in
    `task.user.provider_kwargs`: `uv` (OpenEnv's UV provider on this host), `docker`
    (the same as `use_docker`), `swarm` (a Docker Swarm service), or a cloud sandbox
    of OpenEnv's: `daytona`, `modal`, `aca` (Azure Container Apps), `hf_sandbox`,
    `novita` (their SDK must be installed; see docs/providers.md). Unset: UV, or Docker
    with `use_docker`. Servers of any provider are shared like UV ones
    (`shared_servers`). Not with `base_url`."""
    use_docker: bool = False
    """Launch the env in a Docker container instead of with UV: the image in
    `provider_kwargs.image`, else one built from `provider_kwargs.project_path`'s
    Dockerfile, else the Space's image. The user then runs on its own Prime VM
    (`colocated` off, `vm` on) unless `docker_on_host`. Not with `base_url`."""
    docker_on_host: bool = False
    """With `use_docker`: run the containers with this host's Docker engine, the user
    simulator staying in its runtime on this host (which must be local), and
    containers shared like UV servers (`shared_servers`). Off, the user gets a Prime
    VM of its own, with Docker there."""
    shared_servers: bool = True
    """Launch `env` once per eval and let rollouts share it, each on its own session
    (more servers are launched while all are at their session limit). Applies to UV
    launches, `docker_on_host` containers and the servers of other providers, with a
    local user simulator; off, each rollout launches its own."""
    sessions_per_server: int | None = Field(None, ge=1)
    """Session limit of one shared server; unset, it is learned from the server's
    `CAPACITY_REACHED` answers."""
    max_servers: int | None = Field(None, ge=1)
    """Most shared servers launched at once; unset, while all are full the pool
    launches as many as the waiting rollouts need, as long as the host keeps 1 GiB (or
    twice the largest server's memory) free. An env without concurrent sessions gets
    a server per concurrent rollout, reused by later ones."""
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
    tool_calls: ToolCalls = "text"
    """How the model acts. `text`: each reply is an action written as JSON (or bare
    text), for any model. `native`: the env's MCP tools (for other envs, one `act`
    tool taking the action) become the model's own tools and each tool call is one
    step; for models trained to call tools. The package's harness (the default)
    passes them to the model, as does `--harness.id null`. Native needs the user
    simulator on this host (with `use_docker`, only with `docker_on_host`)."""
    task: OpenEnvTaskConfig = Field(default_factory=OpenEnvTaskConfig)
    """Per-task settings, under `--taskset.task.*`."""

    @model_validator(mode="after")
    def _place_docker_user(self) -> Self:
        from openenv_v1.core.launch.plan import settle_use_docker

        self.use_docker = settle_use_docker(
            self.provider,
            use_docker=self.use_docker,
            base_url=self.base_url,
            flags="--taskset.",
        )
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

    def _require_docker_on_host(self) -> None:
        from verifiers.v1.runtimes import runtime_is_local

        user = self.task.user
        if not self.use_docker:
            raise ValueError(
                "docker_on_host places Docker launches, but use_docker is off: add "
                "--taskset.use-docker true, or drop --taskset.docker-on-host"
            )
        if user.colocated or not runtime_is_local(user.runtime):
            raise ValueError(
                "docker_on_host runs the user simulator on this host beside its Docker "
                "engine, but task.user places it elsewhere (colocated, or a "
                "non-local runtime): drop those task.user settings, or drop "
                "--taskset.docker-on-host to run Docker on a Prime VM"
            )

    def _require_local_user(self) -> None:
        from verifiers.v1.runtimes import runtime_is_local

        user = self.task.user
        on_vm = self.use_docker and not self.docker_on_host
        if on_vm or user.colocated or not runtime_is_local(user.runtime):
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
        from verifiers.v1.runtimes import runtime_is_local

        user = self.task.user
        return bool(
            self.shared_servers
            and self.env
            and not self.base_url
            and (not self.use_docker or self.docker_on_host)
            and not user.colocated
            and runtime_is_local(user.runtime)
        )

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

    def forwarded_values(self) -> dict[str, str]:
        """Values of `task.user.forward_env` in this process; a missing one is an
        error naming it."""
        names = self.task.user.forward_env
        missing = [name for name in names if name not in os.environ]
        if missing:
            raise ValueError(
                f"task.user.forward_env names {', '.join(missing)}, not set in the "
                "eval's environment: export it, or drop it from forward_env"
            )
        return {name: os.environ[name] for name in names}

    def require_target(self) -> None:
        """Fail, naming the flags, when neither `env` nor `base_url` is set."""
        if not self.env and not self.base_url:
            raise ValueError(
                f"taskset {self.id or 'openenv-v1'!r} needs an environment: pass "
                "--taskset.env <org/name> (launched with UV) or --taskset.base-url "
                "<http://host:port> (a running server), or set `env` / `base_url` "
                "under [taskset] in the config file"
            )
