"""ASGI app: `uvicorn server.app:app` from the env's folder, or
`uvicorn mcp_meta_env.server.app:app` / `uv run server` once installed."""

import argparse

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

try:  # installed as the `mcp_meta_env` package
    from .environment import AppleSumEnvironment
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from server.environment import AppleSumEnvironment

app = create_app(
    AppleSumEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="mcp_meta_env",
    max_concurrent_envs=8,
)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the apple sums MCP env.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
