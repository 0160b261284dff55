"""`EnvTarget`: where an episode's environment comes from, as every launcher reads it.

It sits at the bottom of `launch/` (it imports only `leases`), so every launcher can
name it without importing what opens it (`openenv_v1.core.launch.target`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from openenv_v1.core.launch.leases import PoolLeases

# The defaults of the settings of the same name (`openenv_v1.settings.EpisodeSettings`),
# which `EnvTarget` takes too: each is written here only.
LAUNCH_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class EnvTarget:
    """Where an episode's environment comes from: `base_url`, a running server
    (nothing else applies); `base_urls`, running servers leased like shared ones
    (from `pool`, `pool_url`, else this process's `url_pool.own_desk`); a lease from
    the shared servers launched for `env` (`pool` in this process, `pool_url` from
    another); else `env` (an OpenEnv / Hugging Face Space id) launched for this
    episode by the launcher `launcher` names, with `provider_kwargs` as its options
    and `secret_env` added to the server's environment (never shown).
    """

    env: str | None = None
    base_url: str | None = None
    base_urls: tuple[str, ...] = ()
    """Several running servers (`base_url` given as a list); `base_url` is None."""
    use_docker: bool = False
    provider: str | None = None
    """Where the server runs (`plan.PLACES`); None: `docker` with
    `use_docker`, else `uv`."""
    provider_kwargs: Mapping[str, Any] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict, repr=False)
    pool_url: str | None = field(default=None, repr=False)
    pool: PoolLeases | None = field(default=None, repr=False, compare=False)
    launch_timeout_s: float = LAUNCH_TIMEOUT_S
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    message_timeout_s: float = 60.0
    """OpenEnv client's own per-message limit (it raises `TimeoutError`); at least the
    episode's reset and step timeouts."""
    web_ui: bool = False
    """Let a UV-launched server import gradio (OpenEnv's web UI); hidden otherwise."""
    cache_max_gb: float | None = None
    """Bound on the prepared environments' size (`cache.cache_bound`)."""

    @property
    def label(self) -> str:
        return self.base_url or ", ".join(self.base_urls) or self.env or "<no env>"

    @property
    def connects(self) -> bool:
        """Whether its servers are running ones (`base_url` or `base_urls`): nothing
        is launched."""
        return bool(self.base_url or self.base_urls)

    @property
    def launcher(self) -> str:
        """The name of the launcher that runs `env`: `provider`, else `docker` with
        `use_docker`, else `uv`."""
        return self.provider or ("docker" if self.use_docker else "uv")
