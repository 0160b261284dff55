"""An OpenEnv-shaped env server that speaks only HTTP, as `calendar_env` does.

`GET /health`, `POST /reset`, `POST /step` (body `{"action": {...}}`), `GET /state`,
MCP JSON-RPC at `POST /mcp` (`tools/list`, `tools/call`), one env instance shared by
all clients, and no `/ws`: a WebSocket upgrade is answered 403 (Starlette's answer for
a route it does not have). `openenv-v1` must refuse it, naming what it speaks.
"""

from typing import Annotated, Any

from fastapi import Body, FastAPI

app = FastAPI(title="http-only-env")
_shared: dict[str, Any] = {"events": [], "steps": 0}
_TOOLS = [
    {
        "name": "list_events",
        "description": "The calendar's events.",
        "inputSchema": {"type": "object", "properties": {}},
    }
]


def _observation(reward: float | None = None) -> dict[str, Any]:
    return {
        "observation": {"events": list(_shared["events"]), "steps": _shared["steps"]},
        "reward": reward,
        "done": False,
    }


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "healthy"}


@app.post("/reset")
def reset(body: Annotated[dict[str, Any] | None, Body()] = None) -> dict[str, Any]:
    _shared.update(events=[], steps=0)
    return _observation()


@app.post("/step")
def step(body: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
    _shared["steps"] += 1
    _shared["events"].append(body.get("action"))
    return _observation(reward=0.0)


@app.get("/state")
def state() -> dict[str, Any]:
    return {"step_count": _shared["steps"]}


@app.post("/mcp")
def mcp(body: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
    if body.get("method") == "tools/list":
        result: dict[str, Any] = {"tools": _TOOLS}
    else:
        result = {"content": [{"type": "text", "text": str(_shared["events"])}]}
    return {"jsonrpc": "2.0", "id": body.get("id"), "result": result}


no_openapi_app = FastAPI(title="http-only-env", openapi_url=None)
"""The same routes without an OpenAPI document: its routes are found by a GET each."""
no_openapi_app.include_router(app.router)

health_only_app = FastAPI(title="not-openenv")
"""A server with no WebSocket and none of OpenEnv's routes: its 403 is shown as is."""
health_only_app.add_api_route("/health", health)
