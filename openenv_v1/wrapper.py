"""What a wrapper package (one env pinned as a taskset of its own, as `openenv-v1
init` writes them) needs to work on either verifiers line from one source.

    for key, value in LAUNCH.items():
        episode_settings(config).provider_kwargs.setdefault(key, value)

A verifiers 0.2 config keeps the episode settings (`provider_kwargs`, the limits)
under `task.user`; a 0.4 config keeps them itself.
"""

from __future__ import annotations

from typing import Any

from openenv_v1.settings import EpisodeSettings


def episode_settings(config: Any) -> EpisodeSettings:
    """The `EpisodeSettings` of a taskset config of either line: its `task.user`
    (verifiers 0.2) or the config itself (0.4)."""
    user = getattr(getattr(config, "task", None), "user", None)
    if isinstance(user, EpisodeSettings):
        return user
    if isinstance(config, EpisodeSettings):
        return config
    raise TypeError(f"{type(config).__name__} is not an openenv-v1 taskset config")


__all__ = ["episode_settings"]
