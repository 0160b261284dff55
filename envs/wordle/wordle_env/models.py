"""Wire models, shaped like the `openenv/wordle` Space (OpenEnv's `textarena_env`)."""

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import BaseModel, Field


class WordleAction(Action):
    message: str = Field(description="Your guess in square brackets, e.g. [crane].")


class WordleMessage(BaseModel):
    id: int
    content: str
    category: str


class WordleObservation(Observation):
    prompt: str = Field(default="", description="What the game says now.")
    messages: list[WordleMessage] = Field(default_factory=list)
    current_player_id: int = 0
    legal_players: list[int] = Field(default_factory=lambda: [0])
    info: dict[str, Any] = Field(default_factory=dict)


class WordleState(State):
    guesses: list[str] = Field(default_factory=list)
    guesses_left: int = 6
    solved: bool = False
