"""How far a `ServerPool` grows while every server is full, and what stops it.

The pool launches as many servers as the leases held and waiting need, at the
largest session limit seen (one while none is known), up to `max_servers`; without
it, while a launch leaves `MEMORY_FLOOR_BYTES` free, or twice the memory of the
largest running server, whichever is more. A fixed `port` in `provider_kwargs` can
be bound once: one server.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from openenv_v1.core.launch.process_group import available_memory
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget
    from openenv_v1.core.launch.pool_servers import PoolServers

MEMORY_FLOOR_BYTES = 1 << 30
"""Memory left free on the host when no `max_servers` bounds the launches."""


class Growth:
    """The pool's bound on its servers: `max_servers`, or the host's memory."""

    def __init__(self, target: EnvTarget, max_servers: int | None) -> None:
        self._fixed_port = "port" in target.provider_kwargs
        self.max_servers = 1 if self._fixed_port else max_servers

    def may_add(self, launched: int) -> bool:
        """Whether `max_servers` allows one more than `launched`."""
        return self.max_servers is None or launched < self.max_servers

    def wanted(self, servers: PoolServers, demand: int) -> int:
        """Servers to launch now for `demand` leases, within `max_servers`."""
        per_server = servers.per_server()
        room = sum(s.capacity or per_server for s in servers)
        wanted = max(1, math.ceil((demand - room) / per_server)) if per_server else 1
        if self.max_servers is not None:
            wanted = min(wanted, self.max_servers - len(servers))
        return wanted

    def memory_allows(self, servers: PoolServers) -> bool:
        """Whether the host's memory allows one more launch (the module docstring)."""
        if self.max_servers is not None or not len(servers):
            return True
        available = available_memory()
        if available is None:
            return True
        largest = max((s.rss for s in servers), default=0)
        return available - largest >= max(MEMORY_FLOOR_BYTES, 2 * largest)

    def limit(self, launched: int) -> str:
        """What stops the pool at `launched` servers, for a lease's failure."""
        if self.max_servers is None or launched < self.max_servers:
            return "the host has too little free memory for another server"
        if self._fixed_port:
            return f"{setting('provider_kwargs.port')} lets one server bind it"
        return f"{setting('max_servers', self.max_servers)} is set"


__all__ = ["MEMORY_FLOOR_BYTES", "Growth"]
