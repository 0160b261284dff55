"""The OpenEnv-facing core, in two wings: where an env server runs (`launch/`) and
what one episode does against it (`episode/`), with what both use (docs/layout.md
maps the modules). Nothing here imports verifiers. Its names are imported on first
use, so that a small piece can be imported without the OpenEnv client behind the rest.
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
