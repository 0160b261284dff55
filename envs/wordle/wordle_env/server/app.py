"""ASGI app: `uvicorn wordle_env.server.app:app`.

`WORDLE_MAX_SESSIONS` caps concurrent WebSocket sessions (default 64).
"""

import os

from openenv.core.env_server.http_server import create_app

from wordle_env.models import WordleAction, WordleObservation, WordleState
from wordle_env.server.environment import WordleEnvironment

app = create_app(
    WordleEnvironment,
    WordleAction,
    WordleObservation,
    env_name="wordle",
    max_concurrent_envs=int(os.environ.get("WORDLE_MAX_SESSIONS", "64")),
    state_cls=WordleState,
)
