"""The stages of `openenv-v1 check` on fresh sessions of the server: the seed check
(the same reset, and action, twice: the same results?) and the session probe (how many
concurrent sessions the server accepts).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from openenv_v1.cli.check_report import CheckOptions
from openenv_v1.cli.check_stages import StageFailed, result_summary, stage_call
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


async def seed_check(
    session: EnvTarget,
    options: CheckOptions,
    first: dict[str, Any],
    action: dict[str, Any] | None,
    stepped: dict[str, Any] | None,
) -> dict[str, Any]:
    """Repeat the reset (and the action) on a fresh session and compare. Without a
    seed in the reset kwargs: whether the env honours seeds at all."""
    if "seed" not in options.reset:
        return await _seed_honoured(session, options)
    compared = ["reset"] + (["step"] if action is not None else [])
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
            differences = _differences("reset", first, result_summary(again))
            if action is not None and stepped is not None:
                step = await stage_call("step", client.step(action), options.timeout_s)
                differences += _differences("step", stepped, result_summary(step))
    except (StageFailed, EnvFailure) as e:
        return {"status": "error", "compared": compared, "error": str(e)}
    return {
        "status": "differs" if differences else "match",
        "compared": compared,
        "differences": differences,
    }


async def _seeded_reset(
    session: EnvTarget, options: CheckOptions, seed: int
) -> dict[str, Any]:
    """`reset(**reset, seed=seed)` on a fresh session."""
    async with contextlib.AsyncExitStack() as stack:
        client = route_mcp_steps(
            await open_env(session, stack),
            env_source_dir(options.target),
            options.target.label,
        )
        kwargs = {**options.reset, "seed": seed}
        return result_summary(
            await _retry_capacity(
                lambda: stage_call("reset", client.reset(**kwargs), options.timeout_s)
            )
        )


async def _seed_honoured(session: EnvTarget, options: CheckOptions) -> dict[str, Any]:
    """Reset with seed 1 on two fresh sessions and with seed 2 on a third: `honoured`
    (seed 1 twice alike, seed 2 different), `ignored` (all alike: the seed changes
    nothing the reset shows) or `not honoured` (seed 1 twice different). Rollouts of
    a group share a start (`shared_seed`) only on an env that honours seeds."""
    try:
        one = await _seeded_reset(session, options, 1)
        again = await _seeded_reset(session, options, 1)
        two = await _seeded_reset(session, options, 2)
    except (StageFailed, EnvFailure) as e:
        return {"status": "error", "compared": ["reset"], "error": str(e)}
    repeat = _differences("reset", one, again)
    if repeat:
        status = "not honoured"
    else:
        status = "honoured" if _differences("reset", one, two) else "ignored"
    return {
        "status": status,
        "compared": ["reset"],
        "seeds": [1, 1, 2],
        "differences": repeat,
    }


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


def _differences(what: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    found = [f"{what}.{k}" for k in ("reward", "done") if a.get(k) != b.get(k)]
    obs_a, obs_b = a.get("observation") or {}, b.get("observation") or {}
    found += [
        f"{what}.observation.{k}"
        for k in sorted(set(obs_a) | set(obs_b))
        if obs_a.get(k) != obs_b.get(k)
    ]
    return found


async def probe_sessions(session: EnvTarget, options: CheckOptions) -> dict[str, Any]:
    bound = options.probe_sessions
    if bound <= 0:
        return {"status": "not probed"}
    async with contextlib.AsyncExitStack() as stack:
        for held in range(bound):
            # The first probe may still meet the sessions closed just before it.
            patience = _CAPACITY_RETRY_S if held == 0 else 0.0
            try:
                await _open_probe(
                    session, stack, options.timeout_s, patience, options.reset
                )
            except Exception as e:
                code = server_error_code(e)
                if code is not None and code != "CAPACITY_REACHED":
                    return {
                        "status": "reset failed",
                        "accepted": held,
                        "error": f"{code}: {server_error_message(e)}",
                    }
                if code is None:
                    return {"status": "unknown", "accepted": held, "error": describe(e)}
                found = _CAPACITY.search(server_error_message(e))
                return {
                    "status": "refused",
                    "accepted": held,
                    "max_sessions": int(found["max"]) if found else held,
                    "active_at_refusal": int(found["active"]) if found else None,
                }
    return {"status": "all accepted", "accepted": bound, "at_least": bound}


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
