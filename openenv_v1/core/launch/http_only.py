"""An env server that speaks only HTTP, told apart from a broken one.

Some OpenEnv envs (`calendar_env` in the OpenEnv repository) serve `POST /reset`,
`POST /step`, `GET /state` and MCP JSON-RPC at `POST /mcp`, but no `/ws`: the
WebSocket upgrade is refused (HTTP 403). The adapter plays an episode over OpenEnv's
WebSocket session API, one env instance per session, and does not speak to such a
server (docs/real-envs.md says why): OpenEnv's own HTTP `/reset` and `/step` build a
fresh env for each request and close it after (`http_server.py`), so no episode
survives from one request to the next, and `calendar_env`'s share one env between
all clients.

Asked only once the WebSocket has failed, `http_only_refusal` reads the server's
routes cheaply (its OpenAPI document, else a `GET` of each route, which a POST-only
route answers 405 without running it) and, when it serves OpenEnv's HTTP routes,
says what it speaks and what the adapter needs, in place of the bare 403:

    except Exception as e:
        why = await http_only_refusal(url, e) or describe(e)
        raise EnvFailure(f"cannot connect to the server at {url}: {why}") from e
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx

from openenv_v1.core.http_client import async_client, http_base

__all__ = ["http_only_refusal"]

_REJECTED = re.compile(r"rejected WebSocket connection: HTTP (\d{3})")
# The routes of OpenEnv's HTTP API, each with the method it is served on.
_ROUTES = (("POST", "/reset"), ("POST", "/step"), ("GET", "/state"), ("POST", "/mcp"))
_PROBE_TIMEOUT_S = 5.0


def refused_upgrade(error: BaseException) -> int | None:
    """The HTTP status a server answered a WebSocket upgrade with (403, 404, ...), if
    that is what `error`, or an error it was raised from, says; else None."""
    seen: BaseException | None = error
    while seen is not None:
        status = getattr(getattr(seen, "response", None), "status_code", None)
        if isinstance(status, int):
            return status
        if found := _REJECTED.search(str(seen)):
            return int(found[1])
        seen = seen.__cause__ or seen.__context__
    return None


async def http_only_refusal(
    url: str, error: BaseException, timeout_s: float = _PROBE_TIMEOUT_S
) -> str | None:
    """What to tell the user when the WebSocket session at `url` failed with `error`
    because the server speaks only OpenEnv's HTTP API: None unless the upgrade was
    refused (4xx) and the server serves at least `POST /reset` and `POST /step`.
    The probe takes `timeout_s` (at most 5 s) in all."""
    status = refused_upgrade(error)
    if status is None or not 400 <= status < 500:
        return None
    base = http_base(url)
    bound = min(timeout_s, _PROBE_TIMEOUT_S)
    try:
        async with async_client(bound) as http:
            served = await asyncio.wait_for(_served_routes(http, base), bound)
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
    """Which of OpenEnv's HTTP routes the server serves: from its OpenAPI document
    (FastAPI's `/openapi.json`), else by a GET of each, which a route served on POST
    only answers 405 (Method Not Allowed) without running."""
    response = await http.get(f"{base}/openapi.json")
    paths = _openapi_paths(response)
    if paths is not None:
        return {(m, p) for m, p in _ROUTES if m.lower() in (paths.get(p) or {})}
    served = set()
    for method, path in _ROUTES:
        status = (await http.get(f"{base}{path}")).status_code
        if status == (405 if method == "POST" else 200):
            served.add((method, path))
    return served


def _openapi_paths(response: httpx.Response) -> dict[str, Any] | None:
    if response.status_code != 200:
        return None
    try:
        paths = response.json().get("paths")
    except (ValueError, AttributeError):
        return None
    return paths if isinstance(paths, dict) else None
