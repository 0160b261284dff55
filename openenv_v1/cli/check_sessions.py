"""The stages of `openenv-v1 check` on fresh sessions of the server: the seed check
and the session probe. The rollout's own session is closed first, so they fit on a
server that allows only one. A fresh session's client is wrapped as the episode's
is (`episode_client`), and its reset is the episode's own (`reset.reset_frame`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

from openenv_v1.cli.check_report import SeedCheck, Sessions
from openenv_v1.cli.check_stages import CheckRun, StageFailed
from openenv_v1.core.episode.env_episode import episode_client
from openenv_v1.core.episode.frames import Frame, read_frame
from openenv_v1.core.episode.report import EpisodeLimits
from openenv_v1.core.episode.reset import at_capacity, reset_frame
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_message,
)
from openenv_v1.core.launch.target import EnvTarget, open_env

__all__ = ["check_seeds", "probe"]

_CAPACITY = re.compile(r"(?P<active>\d+)/(?P<max>\d+) sessions")
# How long a fresh session retries a server still counting a session just closed.
_CAPACITY_RETRY_S = 5.0


def _fresh(run: CheckRun) -> EnvTarget:
    return EnvTarget(
        base_url=run.url, connect_timeout_s=run.options.target.connect_timeout_s
    )


@contextlib.asynccontextmanager
async def _fresh_session(run: CheckRun) -> AsyncIterator[Any]:
    """A fresh session of the server, its MCP steps routed as the rollout's were."""
    async with contextlib.AsyncExitStack() as stack:
        client = await open_env(_fresh(run), stack)
        yield episode_client(client, run.options.target)


async def check_seeds(run: CheckRun) -> SeedCheck:
    """With a seed in the reset kwargs: the reset (and the action) again on a fresh
    session, compared; without one: whether the env honours seeds at all. A
    warning when the results differ or the check failed."""
    await run.episode.client.disconnect()
    seeded = "seed" in run.options.reset
    found = await (_seed_repeats(run) if seeded else _seed_honoured(run))
    if found.status == "differs":
        run.report.warnings.append(
            "the same seed gave different results on two fresh sessions: "
            + ", ".join(found.differences or ())
        )
    elif found.status == "error":
        run.report.warnings.append(f"seed check failed: {found.error}")
    return found


async def _reset(
    run: CheckRun,
    client: Any,
    kwargs: dict[str, Any],
    patience_s: float = _CAPACITY_RETRY_S,
) -> Frame:
    """The episode's reset on a fresh session, waiting up to `patience_s` while
    the server still counts a session just closed."""
    limits = EpisodeLimits(reset_timeout_s=run.timeout_s, capacity_wait_s=patience_s)
    return await reset_frame(client, kwargs, limits, run.url)


async def _step(run: CheckRun, client: Any, action: dict[str, Any]) -> Frame:
    try:
        return read_frame(await asyncio.wait_for(client.step(action), run.timeout_s))
    except TimeoutError as e:
        raise EnvFailure(f"step did not answer within {run.timeout_s:.0f}s") from e
    except Exception as e:
        raise EnvFailure(f"step failed: {describe(e)}") from e


async def _seed_repeats(run: CheckRun) -> SeedCheck:
    compared = ("reset", "step") if run.action is not None else ("reset",)
    try:
        async with _fresh_session(run) as client:
            again = await _reset(run, client, run.options.reset)
            assert run.first is not None
            differences = _differences("reset", run.first, again)
            if run.action is not None and run.stepped is not None:
                step = await _step(run, client, run.action)
                differences += _differences("step", run.stepped, step)
    except (StageFailed, EnvFailure) as e:
        return SeedCheck("error", compared, error=str(e))
    status = "differs" if differences else "match"
    return SeedCheck(status, compared, differences=differences)


async def _seeded_reset(run: CheckRun, seed: int) -> Frame:
    async with _fresh_session(run) as client:
        return await _reset(run, client, {**run.options.reset, "seed": seed})


async def _seed_honoured(run: CheckRun) -> SeedCheck:
    """Seed 1 on two fresh sessions, seed 2 on a third: `honoured` (seed 1 twice
    alike, seed 2 different), `ignored` (all alike) or `not honoured` (seed 1 twice
    different). Rollouts of a group share a start only on an env that honours
    seeds."""
    try:
        one, again, two = [await _seeded_reset(run, seed) for seed in (1, 1, 2)]
    except (StageFailed, EnvFailure) as e:
        return SeedCheck("error", ("reset",), error=str(e))
    repeat = _differences("reset", one, again)
    if repeat:
        status = "not honoured"
    else:
        status = "honoured" if _differences("reset", one, two) else "ignored"
    return SeedCheck(status, ("reset",), seeds=(1, 1, 2), differences=repeat)


def _differences(what: str, a: Frame, b: Frame) -> tuple[str, ...]:
    found = [
        f"{what}.{k}" for k in ("reward", "done") if getattr(a, k) != getattr(b, k)
    ]
    obs_a, obs_b = a.observation or {}, b.observation or {}
    found += [
        f"{what}.observation.{k}"
        for k in sorted(set(obs_a) | set(obs_b))
        if obs_a.get(k) != obs_b.get(k)
    ]
    return tuple(found)


async def probe(run: CheckRun) -> Sessions:
    """The session probe; a warning when a further session could not reset."""
    found = await _probe_sessions(run)
    if found.status == "reset failed":
        held = found.accepted or 0
        run.report.warnings.append(
            (
                f"only {held} concurrent session(s) can reset"
                if held
                else "a session after the check's own cannot reset"
            )
            + f": the reset of probe session {held + 1} failed ({found.error}); "
            + (
                "keep the eval's concurrency at that"
                if held
                else "the server may "
                "take one reset per process: a server per rollout (Docker) avoids it"
            )
        )
    return found


async def _probe_sessions(run: CheckRun) -> Sessions:
    """Sessions opened, reset and held one by one, up to `probe_sessions`, until one
    is refused (its error names the server's bound) or fails (a session that cannot
    reset is no capacity: BrowserGym's second concurrent reset fails)."""
    bound = run.options.probe_sessions
    if bound <= 0:
        return Sessions("not probed")
    async with contextlib.AsyncExitStack() as stack:
        for held in range(bound):
            # The first probe may still meet the sessions closed just before it.
            patience = _CAPACITY_RETRY_S if held == 0 else 0.0
            try:
                client = await open_env(_fresh(run), stack)
                await _reset(run, client, run.options.reset, patience)
            except Exception as e:
                # The server's own error is the cause of the reset's EnvFailure.
                cause = e.__cause__
                refused = isinstance(cause, Exception) and server_error_code(cause)
                return _refusal(cause if refused else e, held)
    return Sessions("all accepted", accepted=bound, at_least=bound)


def _refusal(e: Exception, held: int) -> Sessions:
    code = server_error_code(e)
    if code is None:
        return Sessions("unknown", accepted=held, error=describe(e))
    if not at_capacity(e):
        error = f"{code}: {server_error_message(e)}"
        return Sessions("reset failed", accepted=held, error=error)
    found = _CAPACITY.search(server_error_message(e))
    return Sessions(
        "refused",
        accepted=held,
        max_sessions=int(found["max"]) if found else held,
        active_at_refusal=int(found["active"]) if found else None,
    )
