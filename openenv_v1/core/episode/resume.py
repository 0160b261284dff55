"""A session lost mid-episode, resumed by a verified replay (`replay.ReplayLog`).

When `EpisodeLimits.resume` is on (the default), a session lost after the first
model turn is replaced (`EnvSession.move`), reset with the same kwargs and sent the
answered actions; the episode goes on only if every answer equals what it saw, else
it ends naming where the replay diverged. At most `MAX_RESUMES` per episode. The
client never reconnects on its own: a session the server closed is `SessionClosed`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from openenv_v1.core.episode.frames import Frame
from openenv_v1.core.episode.replay import ReplayDiverged, ReplayLog, ResumeFailed
from openenv_v1.core.episode.report import EpisodeLimits, EpisodeReport
from openenv_v1.core.errors import clear_error_frame, describe, server_error_code
from openenv_v1.core.launch.target import server_lost

__all__ = ["MAX_RESUMES", "Resumer", "SessionClosed", "session_closed"]

logger = logging.getLogger(__name__)

MAX_RESUMES = 3
"""Times one episode resumes by replay after losing its session (`Resumer`)."""


class SessionClosed(ConnectionError):
    """The server closed the episode's session between two calls."""


class Replayable(Protocol):
    """What a resume needs of the episode (`EnvEpisode`): its session and its
    account, a way to a fresh session (`move`), and its own reset and step."""

    client: Any
    base_url: str | None
    label: str
    limits: EpisodeLimits
    report: EpisodeReport
    move: Callable[[BaseException], Awaitable[None]] | None

    async def reset_frame(self, kwargs: dict[str, Any]) -> Frame: ...

    async def relist_tools(self) -> None: ...

    async def send(self, action: dict[str, Any]) -> Frame: ...


class Resumer:
    """An episode's replay log (`log`, set once its reset played) and its resumes
    left."""

    def __init__(self) -> None:
        self.log: ReplayLog | None = None
        self.left = MAX_RESUMES

    async def step(self, episode: Replayable, action: dict[str, Any]) -> Frame:
        """`episode.send(action)`, on a fresh session resumed by replay whenever the
        session is found lost: closed before the step is sent, or its connection
        lost while it is."""
        while True:
            if session_closed(episode.client):
                lost: BaseException = SessionClosed(
                    "the env server closed the session (it stopped, restarted or "
                    "dropped the connection)"
                )
            else:
                try:
                    return await episode.send(action)
                except Exception as e:
                    if not server_lost(e):
                        raise
                    lost = e
            await self._resume(episode, lost)

    async def _resume(self, episode: Replayable, lost: BaseException) -> None:
        """Move to a fresh session and replay the episode there, again while
        sessions keep being lost, `MAX_RESUMES` times at most. Raises when it
        cannot: `lost` itself with resume off (the episode ends as it would have),
        `ReplayDiverged`, or a `ResumeFailed` naming why."""
        log = self.log
        if not episode.limits.resume or episode.move is None or log is None:
            if isinstance(lost, SessionClosed):
                raise SessionClosed(
                    f"{lost}; not reconnecting to a fresh env mid-episode"
                ) from None
            raise lost
        first = describe(lost)
        while True:
            if not self.left:
                raise ResumeFailed(
                    f"the env server was lost ({first}), and resuming on a fresh "
                    f"session failed {MAX_RESUMES} times; the last: {describe(lost)}"
                ) from lost
            self.left -= 1
            started = time.perf_counter()
            try:
                await episode.move(lost)
                replayed = await _replay(episode, log)
            except ReplayDiverged as e:
                raise ReplayDiverged(
                    f"the env server was lost after {episode.report.steps} steps "
                    f"({first}), and {e}"
                ) from None
            except Exception as e:
                if not server_lost(e):
                    raise ResumeFailed(
                        f"the env server was lost ({first}), and resuming on a "
                        f"fresh session failed: {describe(e)}"
                    ) from e
                lost = e
                continue
            where = episode.base_url
            episode.report.add_resume(replayed, time.perf_counter() - started, where)
            logger.info(
                "%s: resumed on %s after %d steps", episode.label, where, replayed
            )
            return


async def _replay(episode: Replayable, log: ReplayLog) -> int:
    """Reset the fresh session with the episode's kwargs and send it the answered
    actions again, checking each answer against the log; the steps replayed."""
    log.check(0, await episode.reset_frame(log.reset_kwargs))
    await episode.relist_tools()
    for index, exchange in enumerate(log.steps, 1):
        try:
            answer: Frame | str = await episode.send(exchange.action)
        except Exception as e:
            if (code := server_error_code(e)) is None:
                raise
            clear_error_frame(episode.client)
            answer = code
        log.check(index, answer)
    return len(log.steps)


def session_closed(client: Any) -> bool:
    """Whether the server closed the client's WebSocket since the last call. OpenEnv's
    client would reconnect on the next call, to a new session with a fresh env. (Reads
    the client's socket attribute; a client without one is assumed connected.)"""
    if not hasattr(client, "_ws"):
        return False
    ws = client._ws
    state = getattr(getattr(ws, "state", None), "name", "")
    return ws is None or state in ("CLOSING", "CLOSED")
