"""Which launcher runs an env server: one module per place, one face for all.

`Launcher` is that face (OpenEnv's provider shape). Each place is a module with a
`*_launch_plan(target) -> LaunchPlan` and may have `preflight(target)`, which fails
when the place cannot be used at all (its SDK is missing): `check_launcher` runs it
when a taskset is built, `launch_plan` before each launch. Adding a place adds a
module and a line in `PLACES`, imported by name only when a target asks for it.

    plan = launch_plan(target)
    plan.launcher.start(**plan.start_args)
    url = plan.launcher.wait_for_ready()
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypeVar,
    get_args,
    runtime_checkable,
)

from openenv_v1.core.errors import EnvFailure, describe, redact
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_project import AppChoice
    from openenv_v1.core.launch.env_target import EnvTarget

_T = TypeVar("_T")

ProviderName = Literal[
    "uv", "docker", "swarm", "daytona", "modal", "aca", "hf_sandbox", "novita"
]
"""Where env servers run: `uv` (OpenEnv's UV provider, on this host), `docker` (a
container on this host's engine), `swarm` (a Docker Swarm service), or a cloud
sandbox of OpenEnv's providers: `daytona`, `modal`, `aca` (Azure Container Apps),
`hf_sandbox` (Hugging Face sandboxes), `novita`."""


@runtime_checkable
class Launcher(Protocol):
    """One env server at one place, as `ServerPool` and `open_env` drive it.

    `start` forks or creates the server and returns its URL; `wait_for_ready`
    blocks until it answers and returns the URL it answers at (which may differ:
    a relaunch), or raises `EnvFailure` naming the cause; `running` never blocks
    (the pool asks under its lock); `stop` is idempotent, ends what `start` made (a
    start still under way ends its own), and no start follows it."""

    app_choice: AppChoice | None
    """The app it serves and why, when the launcher chose one (UV)."""
    run_on_owner: Callable[[Callable[[], Any]], Any]
    """Runs a callable on the thread the server must die with (`run_here` unset)."""

    def start(self, **start_args: Any) -> str: ...

    def wait_for_ready(self) -> str: ...

    def running(self) -> bool: ...

    def stop(self, grace_s: float = ...) -> None: ...


@dataclass(frozen=True)
class LaunchPlan:
    """A launch to make: the launcher, its `start()` arguments, and how many servers
    a `ServerPool` launches from the start (a Swarm service's tasks)."""

    launcher: Launcher
    start_args: Mapping[str, Any] = field(default_factory=dict)
    servers_at_start: int = 1


class Closeable(Protocol):
    def close(self) -> None: ...


_C = TypeVar("_C", bound=Closeable)


class PoolShared:
    """What the launches of one `ServerPool` share (UV: its template processes):
    one of each type, made on first use, closed with the pool. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[type, Closeable] = {}
        self._closed = False

    def get(self, kind: type[_C]) -> _C | None:
        """The pool's `kind`, made (`kind()`) on first use; None once closed."""
        with self._lock:
            if self._closed:
                return None
            made = self._made.get(kind)
            if made is None:
                made = self._made[kind] = kind()
            assert isinstance(made, kind)
            return made

    def close(self) -> None:
        """Close what was made; idempotent."""
        with self._lock:
            self._closed = True
            made, self._made = list(self._made.values()), {}
        for each in made:
            each.close()


@runtime_checkable
class SharesWithPool(Protocol):
    """A launcher whose launches in one pool share something (`PoolShared`); its
    pool sets `pool_shared` before `start`, which stays None outside a pool."""

    pool_shared: PoolShared | None


def run_here(fn: Callable[[], _T]) -> _T:
    """A launcher's `run_on_owner` until its owner sets one: `fn()` here."""
    return fn()


@dataclass(frozen=True)
class Place:
    """A place env servers run: its module, plan function and name in messages."""

    module: str
    plan: str
    label: str


_CLOUD = "openenv_v1.core.launch.cloud"
PLACES: dict[str, Place] = {
    "uv": Place("openenv_v1.core.launch.uv", "uv_launch_plan", "the UV provider"),
    "docker": Place(
        "openenv_v1.core.launch.docker.container", "docker_launch_plan", "Docker"
    ),
    "swarm": Place(
        "openenv_v1.core.launch.swarm.replica", "swarm_launch_plan", "Swarm"
    ),
    "daytona": Place(_CLOUD, "cloud_launch_plan", "Daytona"),
    "modal": Place(_CLOUD, "cloud_launch_plan", "Modal"),
    "aca": Place(_CLOUD, "cloud_launch_plan", "Azure Container Apps"),
    "hf_sandbox": Place(_CLOUD, "cloud_launch_plan", "HF sandboxes"),
    "novita": Place(_CLOUD, "cloud_launch_plan", "Novita"),
}
assert set(PLACES) == set(get_args(ProviderName))


def settle_use_docker(
    provider: str | None, *, use_docker: bool, base_url: str | None
) -> bool:
    """The `use_docker` a config means, given its `provider` (`docker` turns it on).
    `ValueError` naming the settings to change for a launch with `base_url`, or
    `use_docker` with another provider."""
    drop_base_url = f"drop {setting('base_url')}"
    if base_url and use_docker:
        raise ValueError(
            "use_docker launches a server, but base_url connects to a running one: "
            f"drop {setting('use_docker')}, or {drop_base_url}"
        )
    if provider is None:
        return use_docker
    if base_url:
        raise ValueError(
            f"provider {provider!r} launches servers, but base_url connects to a "
            f"running one: drop {setting('provider')}, or {drop_base_url}"
        )
    if provider == "docker":
        return True
    if use_docker:
        raise ValueError(
            f"use_docker runs servers with Docker, but provider is {provider!r}: "
            f"drop {setting('use_docker')}, or set {setting('provider', 'docker')}"
        )
    return False


def launcher_label(name: str) -> str:
    """The launcher `name` as messages name it ("Docker", "Modal", ...)."""
    place = PLACES.get(name)
    return place.label if place else repr(name)


def _place_module(target: EnvTarget) -> tuple[Place, Any]:
    """`target`'s place and module, its `preflight` passed."""
    name = target.launcher
    place = PLACES.get(name)
    if place is None:
        raise EnvFailure(
            f"unknown provider {name!r}: set provider to one of "
            f"{', '.join(PLACES)} (or leave it unset for UV)"
        )
    try:
        module = importlib.import_module(place.module)
    except ModuleNotFoundError as e:
        if e.name != place.module:
            raise
        raise EnvFailure(
            f"provider {name!r} is not available in this openenv-v1 (no module "
            f"{place.module}): upgrade openenv-v1, or pick another provider"
        ) from None
    preflight = getattr(module, "preflight", None)
    if preflight is not None:
        preflight(target)
    return place, module


def check_launcher(target: EnvTarget) -> None:
    """Fail now, naming the fix, when `target`'s launcher cannot be used at all (an
    unknown provider, or one whose SDK is not installed). Nothing for a `base_url`
    target."""
    if not target.connects:
        _place_module(target)


def launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of `target` at its place (`target.launcher`); `EnvFailure` for bad
    options or a place that cannot be used."""
    place, module = _place_module(target)
    return getattr(module, place.plan)(target)


def launch_failure(target: EnvTarget, exc: Exception) -> EnvFailure:
    """The failure of a launch of `target`, naming the launcher and the cause, with
    the secret values of `target` redacted (a launcher's message may quote a
    command line, an SDK's request, or the server's output)."""
    cause = str(exc) if isinstance(exc, EnvFailure) else describe(exc)
    how = launcher_label(target.launcher)
    failure = f"cannot launch {target.env} with {how}: {cause}"
    return EnvFailure(redact(failure, target.secret_env.values()))
