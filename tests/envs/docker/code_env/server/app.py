"""ASGI app, served from the env's folder: `uvicorn server.app:app` (its Dockerfile's
command). `MAX_SESSIONS` (default 8) is the server's session limit."""

import os

from models import CodeAction, CodeObservation
from openenv.core.env_server.http_server import create_app

from server.environment import CodeEnvironment

app = create_app(
    CodeEnvironment,
    CodeAction,
    CodeObservation,
    env_name="code_env",
    max_concurrent_envs=int(os.environ.get("MAX_SESSIONS", "8")),
)
