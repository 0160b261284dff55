"""Which launcher runs an env server: one module per place, one face for all.

A launcher is a provider with OpenEnv's provider shape as `ServerPool` and `open_env`
drive it: `start(**start_args) -> url`, `wait_for_ready()` (which may return the
URL the server ended up at, when it differs), `running()`,
`stop(grace_s=...)`, plus `app_choice` (what it serves, when it chose) and
`run_on_owner` (where forks that must die with their owner run). Each place is a
module with a `*_launch_plan(target)`; adding a place adds a module and a line in
`PROVIDERS`.

    provider, start_args = launch_plan(target)
    url = provider.start(**start_args)

A place's module may also have `preflight(target)`, which raises `EnvFailure` when
the place cannot be used at all (its SDK is not installed): `check_launcher` runs it
when a taskset is built, before any rollout, and `launch_plan` before each launch.

Imports the places' modules only when a target asks for one (`PROVIDERS`), and
`EnvTarget` only for its type: `target` imports this, never the other way round.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

from openenv_v1.core.errors import EnvFailure, describe

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

ProviderName = Literal[
    "uv", "docker", "swarm", "daytona", "modal", "aca", "hf_sandbox", "novita"
]
"""Where env servers run: `uv` (OpenEnv's UV provider, on this host), `docker` (a
container on this host's engine), `swarm` (a Docker Swarm service), or a cloud
sandbox of OpenEnv's providers: `daytona`, `modal`, `aca` (Azure Container Apps),
`hf_sandbox` (Hugging Face sandboxes), `novita`."""


@dataclass(frozen=True)
class Launcher:
    """A place env servers run: its module, the module's plan function, and its name
    in messages."""

    module: str
    plan: str
    label: str


_CLOUD = "openenv_v1.core.launch.cloud"
PROVIDERS: dict[str, Launcher] = {
    "uv": Launcher("openenv_v1.core.launch.uv", "uv_launch_plan", "the UV provider"),
    "docker": Launcher(
        "openenv_v1.core.launch.docker.container", "docker_launch_plan", "Docker"
    ),
    "swarm": Launcher(
        "openenv_v1.core.launch.swarm.replica", "swarm_launch_plan", "Swarm"
    ),
    "daytona": Launcher(_CLOUD, "cloud_launch_plan", "Daytona"),
    "modal": Launcher(_CLOUD, "cloud_launch_plan", "Modal"),
    "aca": Launcher(_CLOUD, "cloud_launch_plan", "Azure Container Apps"),
    "hf_sandbox": Launcher(_CLOUD, "cloud_launch_plan", "HF sandboxes"),
    "novita": Launcher(_CLOUD, "cloud_launch_plan", "Novita"),
}
assert set(PROVIDERS) == set(get_args(ProviderName))


def settle_use_docker(
    provider: str | None, *, use_docker: bool, base_url: str | None, flags: str
) -> bool:
    """The `use_docker` a config means, given its `provider` (`docker` turns it on:
    one meaning, two spellings). Raises `ValueError` for a launch (`use_docker` or a
    provider) with `base_url`, or `use_docker` with another provider, naming the
    flags under `flags` (the config's prefix, e.g. `--taskset.`)."""
    if base_url and use_docker:
        raise ValueError(
            "use_docker launches a server, but base_url connects to a running one: "
            f"drop {flags}use-docker, or drop {flags}base-url"
        )
    if provider is None:
        return use_docker
    if base_url:
        raise ValueError(
            f"provider {provider!r} launches servers, but base_url connects to a "
            f"running one: drop {flags}provider, or drop {flags}base-url"
        )
    if provider == "docker":
        return True
    if use_docker:
        raise ValueError(
            f"use_docker runs servers with Docker, but provider is {provider!r}: "
            f"drop {flags}use-docker, or set {flags}provider docker"
        )
    return False


def launcher_label(name: str) -> str:
    """The launcher `name` as messages name it ("Docker", "Modal", ...)."""
    launcher = PROVIDERS.get(name)
    return launcher.label if launcher else repr(name)


def _launcher_module(target: EnvTarget) -> tuple[Launcher, Any]:
    name = target.launcher
    launcher = PROVIDERS.get(name)
    if launcher is None:
        raise EnvFailure(
            f"unknown provider {name!r}: set provider to one of "
            f"{', '.join(PROVIDERS)} (or leave it unset for UV)"
        )
    try:
        module = importlib.import_module(launcher.module)
    except ModuleNotFoundError as e:
        if e.name != launcher.module:
            raise
        raise EnvFailure(
            f"provider {name!r} is not available in this openenv-v1 (no module "
            f"{launcher.module}): upgrade openenv-v1, or pick another provider"
        ) from None
    return launcher, module


def check_launcher(target: EnvTarget) -> None:
    """Fail now, naming the fix, when `target`'s launcher cannot be used at all (an
    unknown provider, or one whose SDK is not installed). Nothing for a `base_url`
    target."""
    if target.base_url:
        return
    _, module = _launcher_module(target)
    preflight = getattr(module, "preflight", None)
    if preflight is not None:
        preflight(target)


def launch_plan(target: EnvTarget) -> tuple[Any, dict[str, Any]]:
    """The launcher for `target` (`target.launcher`: `provider`, else Docker with
    `use_docker`, else UV) and the keyword arguments of its `start()`. Raises
    `EnvFailure` for bad options or a launcher that cannot be used."""
    launcher, module = _launcher_module(target)
    preflight = getattr(module, "preflight", None)
    if preflight is not None:
        preflight(target)
    return getattr(module, launcher.plan)(target)


def launch_failure(target: EnvTarget, exc: Exception) -> EnvFailure:
    """The failure of a launch of `target`, naming the launcher and the cause: an
    `EnvFailure`'s own text (the server's output tail), or the exception described."""
    cause = str(exc) if isinstance(exc, EnvFailure) else describe(exc)
    how = launcher_label(target.launcher)
    return EnvFailure(f"cannot launch {target.env} with {how}: {cause}")
