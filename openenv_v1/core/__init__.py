"""The OpenEnv-facing core: launch or connect, read the action schema, reset, step.

Nothing here imports verifiers; `openenv_v1.vf02.user` binds it to a verifiers user simulator.
The flow of one episode, one module each:

    launch.py      open_env: a shared server's session, a UV / Docker launch of one's
                   own, or a base_url connection, all owned by a stack
    pool.py        ServerPool: servers launched once and leased by many rollouts
    launchers.py   launch_plan: the launcher of a target (UV, Docker, or `provider`)
    uv_launch.py   the UV provider extension that owns its process tree
    docker_launch.py  the Docker provider extension: loopback, limits, labels
    docker_image.py   the image a Docker launch runs (built from the env's folder)
    swarm_launch.py   the Swarm provider extension: a service's tasks as servers
    docker_reaper.py  no container, service or network outlives its owner
    cloud_launch.py   OpenEnv's cloud sandbox providers (Daytona, Modal, ACA, HF,
                   Novita) behind the launcher face
    process_group.py  a process group and a parent-death signal per child
    light_import.py   OpenEnv's client imported without gradio
    mcp_route.py   an MCP env's steps as the session's JSON-RPC, for openenv-core 0.2.2
                   servers (which deadlock on them)
    schema.py      ActionSpec: the live action schema and, for MCP envs, the tool list
    actions.py     parse_action: a model reply -> an action dict, or InvalidAction
    render.py      observations, the action format and feedback as model-facing text
    images.py      pixel fields of an observation found and encoded as PNG
    turns.py       Turn: an observation as bounded text plus its images
    episode.py     EnvEpisode: reset, step, reward sum, done, invalid-action bounds

Its names are imported on first use, so that a small piece (`process_group`, say)
can be imported without the OpenEnv client behind the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_v1.core.episode import (
        EnvEpisode,
        EpisodeLimits,
        EpisodeReport,
        open_episode,
    )
    from openenv_v1.core.errors import EnvFailure
    from openenv_v1.core.launch import EnvTarget, open_env
    from openenv_v1.core.schema import ActionSpec

_HOMES = {
    "ActionSpec": "openenv_v1.core.schema",
    "EnvEpisode": "openenv_v1.core.episode",
    "EnvFailure": "openenv_v1.core.errors",
    "EnvTarget": "openenv_v1.core.launch",
    "EpisodeLimits": "openenv_v1.core.episode",
    "EpisodeReport": "openenv_v1.core.episode",
    "open_env": "openenv_v1.core.launch",
    "open_episode": "openenv_v1.core.episode",
}

__all__ = [
    "ActionSpec",
    "EnvEpisode",
    "EnvFailure",
    "EnvTarget",
    "EpisodeLimits",
    "EpisodeReport",
    "open_env",
    "open_episode",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
