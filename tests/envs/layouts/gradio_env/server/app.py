"""ASGI app: `uvicorn server.app:app` from the env's folder (as its Dockerfile runs
it), or `uvicorn gradio_env.server.app:app` / `uv run server` once installed.

Imports gradio at module level, and declares it in pyproject.toml."""

import argparse

import gradio
from openenv.core.env_server.http_server import create_app

try:  # installed as the `gradio_env` package
    from ..models import GuessAction, GuessObservation, GuessState
    from .environment import GuessEnvironment
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from models import GuessAction, GuessObservation, GuessState
    from server.environment import GuessEnvironment

app = create_app(
    GuessEnvironment,
    GuessAction,
    GuessObservation,
    env_name="gradio_env",
    max_concurrent_envs=8,
    state_cls=GuessState,
)


@app.get("/gradio_version")
def gradio_version() -> dict[str, str]:
    """The gradio this server imported (why it imports gradio at all)."""
    return {"gradio": gradio.__version__}


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the guess-the-number env.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
