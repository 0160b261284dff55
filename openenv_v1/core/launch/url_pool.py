"""Running OpenEnv servers given as a list of base URLs, leased as the pool's are;
nothing is launched or stopped. A lease goes to the server with the fewest leases
among those with room (of several, the one leased longest ago); a server a rollout
lost is taken out until its `/health` answers again (probed every `_POLL_S`, for
`return_wait_s` at most); a lease fails once no session ended and no server came
back for `capacity_wait_s`. A process without the eval's desk (a user simulator off
this host) leases from one of its own, `own_desk(urls)`.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence

from tenacity import stop_before_delay, wait_chain, wait_fixed

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.lease_book import LeaseDeskBase, LeaseWait
from openenv_v1.core.launch.pool_servers import ServerSeats, answers_again
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

RETURN_WAIT_S = 600.0
"""Seconds a server taken out is probed for before it is given up on."""
_POLL_S = (0.5, 1.0, 2.0, 5.0)
"""Spacing of the `/health` probes of a server taken out (the last one repeats)."""
_WAITS = [wait_fixed(s) for s in _POLL_S]


class UrlPool(LeaseDeskBase):
    """A lease desk for running servers given by URL (the module docstring).
    Thread-safe; `close()` is idempotent and stops no server."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        sessions_per_server: int | None = None,
        capacity_wait_s: float = 30.0,
        return_wait_s: float = RETURN_WAIT_S,
    ) -> None:
        if not urls:
            raise ValueError("UrlPool needs at least one URL")
        super().__init__(logger, "urls")
        self.urls = tuple(url.rstrip("/") for url in urls)
        self._servers = [
            ServerSeats(url=url, ready=True, capacity=sessions_per_server)
            for url in self.urls
        ]
        self._capacity_wait_s = capacity_wait_s
        self._return_wait_s = return_wait_s
        self._leased_at: dict[str | None, int] = {}  # `_lease_count` at its last lease
        self._lease_count = itertools.count(1)

    def close(self) -> None:
        """Stop serving leases (waiting ones fail) and the `/health` probes."""
        self._closed.set()
        with self._cond:
            self._waiters.notify_locked()
        if self._http is not None:
            self._http.close()

    def servers(self) -> list[str]:
        """URLs of the servers taking leases (not taken out), for logs and tests."""
        with self._cond:
            return [s.url for s in self._servers if s.url and not s.suspect]

    def capacities(self) -> dict[str, int | None]:
        """Each server's session limit, None while unknown; for logs and tests."""
        with self._cond:
            return {s.url or "": s.capacity for s in self._servers}

    # --- internals; `_locked` methods run with `self._cond` held ---

    def _try_lease_locked(self, pid: int, wait: LeaseWait) -> tuple[str, str] | None:
        if self._closed.is_set():
            raise EnvFailure("the base_url servers' lease desk was closed")
        self._book.reap()
        candidates = [s for s in self._servers if s.has_room()]
        if candidates:
            server = min(
                candidates, key=lambda s: (len(s.leases), self._leased_at.get(s.url, 0))
            )
            self._leased_at[server.url] = next(self._lease_count)
            return self._book.grant(server, pid)
        if any(s.settling() or s.capacity is None for s in self._in_locked()):
            # Sessions on trial end within one request's timeout.
            wait.full_since = None
            return None
        if self._waiters.stuck_locked(wait, self._capacity_wait_s):
            raise EnvFailure(self._stuck_message_locked())
        return None

    def _in_locked(self) -> list[ServerSeats]:
        return [s for s in self._servers if s.ready and not s.suspect]

    def _stuck_message_locked(self) -> str:
        wait = f"{self._capacity_wait_s:g}s"
        urls = setting("base_url")
        if not self._in_locked():
            return (
                f"no server of {urls} ({', '.join(self.urls)}) could be reached, and none came back "
                f"within {wait}: start them, or correct the URLs in {urls}"
            )
        held = ", ".join(f"{s.url} {len(s.leases)}" for s in self._in_locked())
        return (
            f"every server of {urls} stayed at its session limit (sessions held: "
            f"{held}), with no session ending, for {wait}: add servers to {urls}, "
            "raise their session limit, or lower the eval's concurrency"
        )

    def _lost(self, lease_id: str) -> None:
        """The server of `lease_id` is taken out: no lease goes to it until its
        `/health` answers (probed on a thread of its own)."""
        with self._cond:
            lease = self._book.drop(lease_id)
            self._waiters.notify_locked()
            if lease is None or lease.server.suspect or not lease.server.ready:
                return
            lease.server.suspect = True
        logger.warning(
            "env server %s could not be reached; no sessions go to it until its "
            "/health answers",
            lease.server.url,
        )
        threading.Thread(
            target=self._await_return,
            args=(lease.server,),
            name="openenv-v1-url-probe",
            daemon=True,
        ).start()

    def _await_return(self, server: ServerSeats) -> None:
        """Probe `server`'s `/health` until it answers (it takes leases again), the
        desk closes, or `return_wait_s` pass (it is given up on)."""
        assert server.url is not None
        stop = stop_before_delay(self._return_wait_s)
        if answers_again(server.url, self._closed, stop, wait_chain(*_WAITS)):
            with self._cond:
                server.suspect = False
                self._waiters.progress_locked()
            logger.info("env server %s answers again; it takes sessions", server.url)
            return
        if not self._closed.is_set():
            with self._cond:
                server.ready = False
            logger.warning(
                "env server %s did not come back within %.0fs; no sessions go to it "
                "in this eval",
                server.url,
                self._return_wait_s,
            )


_OWN_DESKS: dict[tuple[str, ...], UrlPool] = {}
_OWN_DESKS_LOCK = threading.Lock()


def own_desk(urls: Sequence[str]) -> UrlPool:
    """This process's own desk for `urls`, made once (a process without the eval's)."""
    key = tuple(urls)
    with _OWN_DESKS_LOCK:
        desk = _OWN_DESKS.get(key)
        if desk is None:
            desk = _OWN_DESKS[key] = UrlPool(key)
        return desk


__all__ = ["RETURN_WAIT_S", "UrlPool", "own_desk"]
