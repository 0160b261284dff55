"""The stages of `openenv-v1 check` on fresh sessions of the server: the seed check
(the same reset, and action, twice: the same results?) and the session probe (how many
concurrent sessions the server accepts). The rollout's own session is closed first:
its slot is freed (the server keeps running) so they fit on a server that allows only
one.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from openenv_v1.cli.check_report import CheckOptions, Outcome, SeedCheck, Sessions
from openenv_v1.cli.check_stages import CheckRun, StageFailed, stage_call
from openenv_v1.core.episode.env_source import env_source_dir
from openenv_v1.core.episode.mcp_route import route_mcp_steps
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_message,
)
from openenv_v1.core.launch.target import EnvTarget, open_env

_CAPACITY = re.compile(r"(?P<active>\d+)/(?P<max>\d+) sessions")
# How long a fresh session retries a server still counting a session just closed.
_CAPACITY_RETRY_S = 5.0


def _fresh(run: CheckRun) -> EnvTarget:
    return EnvTarget(
        base_url=run.url, connect_timeout_s=run.options.target.connect_timeout_s
    )


async def check_seeds(run: CheckRun) -> SeedCheck:
    """The seed check, after the rollout's session is closed; a warning when the
    results differ or the check itself failed."""
    await run.client.disconnect()
    first = Outcome.of(run.first)
    stepped = Outcome.of(run.stepped) if run.stepped is not None else None
    found = await seed_check(_fresh(run), run.options, first, run.action, stepped)
    if found.status == "differs":
        run.report.warnings.append(
            "the same seed gave different results on two fresh sessions: "
            + ", ".join(found.differences or ())
        )
    elif found.status == "error":
        run.report.warnings.append(f"seed check failed: {found.error}")
    return found


async def seed_check(
    session: EnvTarget,
    options: CheckOptions,
    first: Outcome,
    action: dict[str, Any] | None,
    stepped: Outcome | None,
) -> SeedCheck:
    """Repeat the reset (and the action) on a fresh session and compare. Without a
    seed in the reset kwargs: whether the env honours seeds at all."""
    if "seed" not in options.reset:
        return await _seed_honoured(session, options)
    compared = ("reset", "step") if action is not None else ("reset",)
    try:
        async with contextlib.AsyncExitStack() as stack:
            client = route_mcp_steps(
                await open_env(session, stack),
                env_source_dir(options.target),
                options.target.label,
            )
            again = await _retry_capacity(
                lambda: stage_call(
                    "reset", client.reset(**options.reset), options.timeout_s
                )
            )
            differences = _differences("reset", first, Outcome.of(again))
            if action is not None and stepped is not None:
                step = await stage_call("step", client.step(action), options.timeout_s)
                differences += _differences("step", stepped, Outcome.of(step))
    except (StageFailed, EnvFailure) as e:
        return SeedCheck("error", compared, error=str(e))
    status = "differs" if differences else "match"
    return SeedCheck(status, compared, differences=differences)


async def _seeded_reset(
    session: EnvTarget, options: CheckOptions, seed: int
) -> Outcome:
    """`reset(**reset, seed=seed)` on a fresh session."""
    async with contextlib.AsyncExitStack() as stack:
        client = route_mcp_steps(
            await open_env(session, stack),
            env_source_dir(options.target),
            options.target.label,
        )
        kwargs = {**options.reset, "seed": seed}
        return Outcome.of(
            await _retry_capacity(
                lambda: stage_call("reset", client.reset(**kwargs), options.timeout_s)
            )
        )


async def _seed_honoured(session: EnvTarget, options: CheckOptions) -> SeedCheck:
    """Reset with seed 1 on two fresh sessions and with seed 2 on a third: `honoured`
    (seed 1 twice alike, seed 2 different), `ignored` (all alike: the seed changes
    nothing the reset shows) or `not honoured` (seed 1 twice different). Rollouts of
    a group share a start (`shared_seed`) only on an env that honours seeds."""
    try:
        one = await _seeded_reset(session, options, 1)
        again = await _seeded_reset(session, options, 1)
        two = await _seeded_reset(session, options, 2)
    except (StageFailed, EnvFailure) as e:
        return SeedCheck("error", ("reset",), error=str(e))
    repeat = _differences("reset", one, again)
    if repeat:
        status = "not honoured"
    else:
        status = "honoured" if _differences("reset", one, two) else "ignored"
    return SeedCheck(status, ("reset",), seeds=(1, 1, 2), differences=repeat)


async def _retry_capacity(call: Callable[[], Awaitable[Any]]) -> Any:
    """`call()`, retried briefly while the server still counts a session just closed."""
    deadline = time.monotonic() + _CAPACITY_RETRY_S
    while True:
        try:
            return await call()
        except StageFailed as e:
            if "CAPACITY_REACHED" not in str(e) or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)


def _differences(what: str, a: Outcome, b: Outcome) -> tuple[str, ...]:
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
    """The session probe; a warning when a further session opened but could not
    reset."""
    found = await probe_sessions(_fresh(run), run.options)
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


async def probe_sessions(session: EnvTarget, options: CheckOptions) -> Sessions:
    """Sessions opened and reset one by one, up to `probe_sessions`, until one is
    refused (its error names the server's bound) or fails."""
    bound = options.probe_sessions
    if bound <= 0:
        return Sessions("not probed")
    async with contextlib.AsyncExitStack() as stack:
        for held in range(bound):
            # The first probe may still meet the sessions closed just before it.
            patience = _CAPACITY_RETRY_S if held == 0 else 0.0
            try:
                await _open_probe(
                    session, stack, options.timeout_s, patience, options.reset
                )
            except Exception as e:
                return _refusal(e, held)
    return Sessions("all accepted", accepted=bound, at_least=bound)


def _refusal(e: Exception, held: int) -> Sessions:
    code = server_error_code(e)
    if code is None:
        return Sessions("unknown", accepted=held, error=describe(e))
    if code != "CAPACITY_REACHED":
        error = f"{code}: {server_error_message(e)}"
        return Sessions("reset failed", accepted=held, error=error)
    found = _CAPACITY.search(server_error_message(e))
    return Sessions(
        "refused",
        accepted=held,
        max_sessions=int(found["max"]) if found else held,
        active_at_refusal=int(found["active"]) if found else None,
    )


async def _open_probe(
    session: EnvTarget,
    stack: contextlib.AsyncExitStack,
    timeout_s: float,
    patience_s: float,
    reset: dict[str, Any],
) -> None:
    """Open one more session and reset it (as a rollout would), held until `stack`
    closes. The server creates it as the socket opens, so a refusal
    (CAPACITY_REACHED, raised as is) comes with the first message; it is retried for
    `patience_s`. A reset the env refuses is raised too: a session that cannot
    reset is no capacity (BrowserGym's second concurrent reset fails)."""
    client = await open_env(session, stack)
    deadline = time.monotonic() + patience_s
    while True:
        try:
            await asyncio.wait_for(client.reset(**reset), timeout_s)
            return
        except Exception as e:
            code = server_error_code(e)
            if code != "CAPACITY_REACHED" or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)
