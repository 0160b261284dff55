"""What one env step costs through the adapter against the raw OpenEnv client
(`benchmarks/run.py`'s last table): the same Wordle games on one directly served
server."""

from __future__ import annotations

import contextlib
import statistics
import time

__all__ = ["GUESSES", "step_overhead"]

GUESSES = ["crane", "pious", "lofty", "bumpy", "giddy", "whisk"]


async def step_overhead(url: str, episodes: int) -> tuple[float, float, float]:
    """Median seconds per step: a raw `GenericEnvClient.step` on a session of its own,
    our `EnvEpisode.act` (parse, validate, step, render), and the client step inside
    that `act` (same session and moment, so the difference is the adapter's own)."""
    from openenv_v1.core import EnvEpisode, EnvTarget, EpisodeLimits, open_episode
    from openenv_v1.core.light_import import generic_client_class

    raw_times: list[float] = []
    ours_times: list[float] = []
    inner_times: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        raw = await stack.enter_async_context(generic_client_class()(base_url=url))
        first = await open_episode(EnvTarget(base_url=url), EpisodeLimits(), stack)
        client_step = first.client.step

        async def timed_step(action, **kwargs):
            started = time.perf_counter()
            try:
                return await client_step(action, **kwargs)
            finally:
                inner_times.append(time.perf_counter() - started)

        for seed in range(episodes):
            await raw.reset(seed=seed)
            for guess in GUESSES:
                started = time.perf_counter()
                result = await raw.step({"message": f"[{guess}]"})
                raw_times.append(time.perf_counter() - started)
                if result.done:
                    break
            # A fresh account per game, on the one session (as `raw` has).
            episode = EnvEpisode(
                first.client,
                first.spec,
                first.limits,
                first.label,
                message_timeout_s=first.message_timeout_s,
            )
            await episode.reset({"seed": seed})
            first.client.step = timed_step
            for guess in GUESSES:
                started = time.perf_counter()
                await episode.act(f"[{guess}]")
                ours_times.append(time.perf_counter() - started)
                if episode.report.done:
                    break
            first.client.step = client_step
    return tuple(statistics.median(t) for t in (raw_times, ours_times, inner_times))
