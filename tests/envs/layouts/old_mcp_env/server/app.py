"""ASGI app: `uvicorn server.app:app` from the env's folder, or
`uvicorn old_mcp_env.server.app:app` / `uv run server` once installed."""

import argparse

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

try:  # installed as the `old_mcp_env` package
    from .environment import TallyEnvironment
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from server.environment import TallyEnvironment

app = create_app(
    TallyEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="old_mcp_env",
    max_concurrent_envs=4,
)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the tally MCP env.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
