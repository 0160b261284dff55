"""ASGI app: `uvicorn wordle_env.server.app:app`.

Runs on OpenEnv's server of either client package: openenv 0.10 (this project's own
environment, and openenv-v1's `vf02` extra) or openenv-core 0.3 (openenv-v1's `vf04`
extra, which ships this package in its wheel). openenv-core 0.3 has no typed state
schema (`state_cls`) and no Task API routes; the game plays the same on both.

`WORDLE_MAX_SESSIONS` caps concurrent WebSocket sessions (default 64).
"""

import inspect
import os
from typing import Any

from openenv.core.env_server.http_server import create_app

from wordle_env.models import WordleAction, WordleObservation, WordleState
from wordle_env.server.environment import WordleEnvironment

_typed_state: dict[str, Any] = (
    {"state_cls": WordleState}
    if "state_cls" in inspect.signature(create_app).parameters
    else {}
)

app = create_app(
    WordleEnvironment,
    WordleAction,
    WordleObservation,
    env_name="wordle",
    max_concurrent_envs=int(os.environ.get("WORDLE_MAX_SESSIONS", "64")),
    **_typed_state,
)
