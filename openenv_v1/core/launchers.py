"""Which launcher runs an env server: one module per place, one face for all.

A launcher is a provider with OpenEnv's provider shape as `ServerPool` and `open_env`
drive it: `start(**start_args) -> url`, `wait_for_ready()`, `running()`,
`stop(grace_s=...)`, plus `app_choice` (what it serves, when it chose) and
`run_on_owner` (where forks that must die with their owner run). Each place is a
module with a `*_launch_plan(target)`; adding a place adds a module and a line here.

    provider, start_args = launch_plan(target)
    url = provider.start(**start_args)
"""

from __future__ import annotations

from typing import Any

from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.launch import EnvTarget, uv_launch_plan


def launch_plan(target: EnvTarget) -> tuple[Any, dict[str, Any]]:
    """The launcher for `target` (Docker with `use_docker`, else UV) and the
    keyword arguments of its `start()`. Raises `EnvFailure` for bad options."""
    if target.use_docker:
        from openenv_v1.core.docker_launch import docker_launch_plan

        return docker_launch_plan(target)
    return uv_launch_plan(target)


def launch_failure(target: EnvTarget, exc: Exception) -> EnvFailure:
    """The failure of a launch of `target`, naming the launcher and the cause: an
    `EnvFailure`'s own text (the server's output tail), or the exception described."""
    cause = str(exc) if isinstance(exc, EnvFailure) else describe(exc)
    how = "Docker" if target.use_docker else "the UV provider"
    return EnvFailure(f"cannot launch {target.env} with {how}: {cause}")
