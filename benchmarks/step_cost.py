"""What one env step costs through the adapter against the raw OpenEnv client, on one
directly served server: `timed_sessions` (the two sessions and the timing of the
client step inside our `act`, shared by `benchmarks/run.py`'s last table and
`benchmarks/pixels.py`'s step row) and `step_overhead` (the Wordle games of
`run.py`)."""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GUESSES", "TimedSessions", "step_overhead", "timed_sessions"]

GUESSES = ["crane", "pious", "lofty", "bumpy", "giddy", "whisk"]


@dataclass
class TimedSessions:
    raw: Any
    """A raw `GenericEnvClient` on a session of its own."""
    opened: Any
    """Our episode's connection (`open_episode`), its client's `step` timed."""
    inner_times: list[float] = field(default_factory=list)
    """Seconds of each client step made inside our episodes' `act`."""

    def new_episode(self) -> Any:
        """A fresh `EnvEpisode` (a fresh account per game) on our one session, as
        `raw` plays each game on its one session."""
        from openenv_v1.core import EnvEpisode

        opened = self.opened
        return EnvEpisode(
            opened.client,
            opened.spec,
            opened.limits,
            opened.label,
            message_timeout_s=opened.message_timeout_s,
        )


@contextlib.asynccontextmanager
async def timed_sessions(url: str) -> AsyncIterator[TimedSessions]:
    """Both sessions on the server at `url`, closed on exit; every `step` of our
    session's client is timed into `inner_times` (only `act` steps it: resets do not
    go through `step`), so ours minus inner is the adapter's own cost."""
    from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
    from openenv_v1.core.light_import import generic_client_class

    async with contextlib.AsyncExitStack() as stack:
        raw = await stack.enter_async_context(generic_client_class()(base_url=url))
        opened = await open_episode(EnvTarget(base_url=url), EpisodeLimits(), stack)
        sessions = TimedSessions(raw, opened)
        client_step = opened.client.step

        async def timed_step(action, **kwargs):
            started = time.perf_counter()
            try:
                return await client_step(action, **kwargs)
            finally:
                sessions.inner_times.append(time.perf_counter() - started)

        opened.client.step = timed_step
        yield sessions


async def step_overhead(url: str, episodes: int) -> tuple[float, float, float]:
    """Median seconds per step: a raw `GenericEnvClient.step` on a session of its own,
    our `EnvEpisode.act` (parse, validate, step, render), and the client step inside
    that `act` (same session and moment, so the difference is the adapter's own)."""
    raw_times: list[float] = []
    ours_times: list[float] = []
    async with timed_sessions(url) as sessions:
        for seed in range(episodes):
            await sessions.raw.reset(seed=seed)
            for guess in GUESSES:
                started = time.perf_counter()
                result = await sessions.raw.step({"message": f"[{guess}]"})
                raw_times.append(time.perf_counter() - started)
                if result.done:
                    break
            episode = sessions.new_episode()
            await episode.reset({"seed": seed})
            for guess in GUESSES:
                started = time.perf_counter()
                await episode.act(f"[{guess}]")
                ours_times.append(time.perf_counter() - started)
                if episode.report.done:
                    break
        inner_times = sessions.inner_times
    return tuple(statistics.median(t) for t in (raw_times, ours_times, inner_times))
