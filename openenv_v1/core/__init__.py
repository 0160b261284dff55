"""The OpenEnv-facing core, in two wings: where an env server runs, and what one
episode does against it.

Nothing here imports verifiers; `openenv_v1.vf02` and `openenv_v1.vf04` bind it.

    launch/        where an env server runs and who owns it: `open_env` from an
                   `EnvTarget` (base_url, a pooled server, UV, Docker, Swarm, cloud)
    episode/       one episode against a connected client: schema, replies to
                   actions, observations to turns, `EnvEpisode`
    tasks.py       the taskset's task plan: resets, the env's own Task API, stable
                   keys, shared seeds
    manifest.py    what an env folder's `openenv.yaml` declares

What both wings use:

    errors.py         EnvFailure and redaction of what reaches logs
    setting_names.py  a setting named by its own name; a binding's Surface renders it
    openenv_lines.py  what differs between openenv 0.10 and openenv-core 0.3.0
    light_import.py   OpenEnv's client imported without gradio (`no_gradio/`)
    http_client.py    the HTTP clients the core opens: one TLS context per process
    local_http.py     our loopback endpoints: unix sockets, a token, JSON only

Its names are imported on first use, so that a small piece (`launch.process_group`,
say) can be imported without the OpenEnv client behind the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_v1.core.light_import import lazy_exports

if TYPE_CHECKING:
    from openenv_v1.core.episode.env_episode import EnvEpisode, open_episode
    from openenv_v1.core.episode.report import EpisodeLimits, EpisodeReport
    from openenv_v1.core.episode.schema import ActionSpec
    from openenv_v1.core.errors import EnvFailure
    from openenv_v1.core.launch.target import EnvTarget, open_env

_HOMES = {
    "ActionSpec": "openenv_v1.core.episode.schema",
    "EnvEpisode": "openenv_v1.core.episode.env_episode",
    "EnvFailure": "openenv_v1.core.errors",
    "EnvTarget": "openenv_v1.core.launch.target",
    "EpisodeLimits": "openenv_v1.core.episode.report",
    "EpisodeReport": "openenv_v1.core.episode.report",
    "open_env": "openenv_v1.core.launch.target",
    "open_episode": "openenv_v1.core.episode.env_episode",
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


__getattr__ = lazy_exports(__name__, _HOMES)
