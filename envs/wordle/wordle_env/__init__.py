"""An offline Wordle environment for OpenEnv, shaped like the `openenv/wordle` Space.

The wire interface matches the Space (OpenEnv's `textarena_env`): the action is
`{"message": "[crane]"}`, observations carry the game text in `prompt` plus the message
history in `messages`, and `reset` opens a new game. Unlike the Space it needs no
network, and `reset(seed=n)` picks the secret word deterministically.

Its home is this uv project (openenv 0.10), the folder UV and Docker launch; the
openenv-v1 wheel ships this package too, where it runs on whichever OpenEnv client
package the wheel's extra installed (`server/app.py`).
"""

from wordle_env.game import GuessResult, WordleGame
from wordle_env.models import (
    WordleAction,
    WordleMessage,
    WordleObservation,
    WordleState,
)

__all__ = [
    "GuessResult",
    "WordleAction",
    "WordleGame",
    "WordleMessage",
    "WordleObservation",
    "WordleState",
]
