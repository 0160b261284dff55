"""An env server that speaks only HTTP, told apart from a broken one.

What it gives: some OpenEnv envs (`calendar_env` of the OpenEnv repository) serve
`POST /reset`, `POST /step`, `GET /state` and `POST /mcp` but refuse the WebSocket
upgrade at `/ws` (HTTP 403). The adapter plays over OpenEnv's WebSocket session API
and cannot play them (docs/real-envs.md says why); without this module its failure
says only "HTTP 403". Asked only after a refused upgrade, `http_only_refusal` reads
the server's routes (its OpenAPI document, else a `GET` of each, which a POST-only
route answers 405 without running it; 5 s at most) and, when it serves OpenEnv's
HTTP routes, says so and what the adapter needs (`tests/test_http_only.py`).
"""

from __future__ import annotations

import asyncio
import re

import httpx

from openenv_v1.core.http_client import async_client, http_base

__all__ = ["http_only_refusal"]

_REJECTED = re.compile(r"rejected WebSocket connection: HTTP (\d{3})")
_ROUTES = (("POST", "/reset"), ("POST", "/step"), ("GET", "/state"), ("POST", "/mcp"))
_PROBE_TIMEOUT_S = 5.0


def refused_upgrade(error: BaseException) -> int | None:
    """The HTTP status a server answered a WebSocket upgrade with, if `error` or an
    error it was raised from says so; else None."""
    seen: BaseException | None = error
    while seen is not None:
        status = getattr(getattr(seen, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
        if found := _REJECTED.search(str(seen)):
            return int(found[1])
        seen = seen.__cause__ or seen.__context__
    return None


async def http_only_refusal(url: str, error: BaseException) -> str | None:
    """Why the WebSocket session at `url` failed with `error` when the server speaks
    only OpenEnv's HTTP API: None unless the upgrade was refused (4xx) and the server
    serves at least `POST /reset` and `POST /step`."""
    status = refused_upgrade(error)
    if status is None or not 400 <= status < 500:
        return None
    try:
        async with async_client(_PROBE_TIMEOUT_S) as http:
            served = await asyncio.wait_for(
                _served_routes(http, http_base(url)), _PROBE_TIMEOUT_S
            )
    except (httpx.HTTPError, TimeoutError):
        return None
    if not {("POST", "/reset"), ("POST", "/step")} <= served:
        return None
    routes = ", ".join(f"{m} {p}" for m, p in _ROUTES if (m, p) in served)
    return (
        f"it speaks only HTTP ({routes}; its /ws refused the "
        f"WebSocket upgrade: HTTP {status}), and openenv-v1 needs OpenEnv's WebSocket "
        "session API at /ws: an episode's reset and steps must reach one env instance "
        "of its own, and OpenEnv's HTTP /reset and /step build a fresh env per request "
        "(or, as calendar_env's do, share one env between all clients). Serve the env "
        "with OpenEnv's `create_app`, which serves /ws beside those routes; if this "
        "server does serve /ws, what is in front of it (a proxy, an auth layer) "
        "refused the upgrade"
    )


async def _served_routes(http: httpx.AsyncClient, base: str) -> set[tuple[str, str]]:
    """Which of `_ROUTES` the server serves, by its OpenAPI document, else by a GET
    of each (405 for a route served on POST only)."""
    response = await http.get(f"{base}/openapi.json")
    try:
        paths = response.json()["paths"] if response.status_code == 200 else None
    except (ValueError, KeyError, TypeError):
        paths = None
    if isinstance(paths, dict):
        return {(m, p) for m, p in _ROUTES if m.lower() in (paths.get(p) or {})}
    served = set()
    for method, path in _ROUTES:
        status = (await http.get(f"{base}{path}")).status_code
        if status == (405 if method == "POST" else 200):
            served.add((method, path))
    return served
