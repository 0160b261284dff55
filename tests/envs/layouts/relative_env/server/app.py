"""ASGI app: `uvicorn relative_env.server.app:app` or `uv run server`, once installed.

Its imports are relative, so `uvicorn server.app:app` (what openenv.yaml names) fails
with "attempted relative import beyond top-level package", as in real envs."""

import argparse

from openenv.core.env_server.http_server import create_app

from ..models import GuessAction, GuessObservation, GuessState
from .environment import GuessEnvironment

app = create_app(
    GuessEnvironment,
    GuessAction,
    GuessObservation,
    env_name="relative_env",
    max_concurrent_envs=8,
    state_cls=GuessState,
)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the guess-the-number env.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
