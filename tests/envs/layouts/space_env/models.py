"""Wire models of the guess-the-number game."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    guess: int = Field(ge=1, le=20, description="A whole number from 1 to 20.")


class GuessObservation(Observation):
    message: str = Field(default="", description="What the game says now.")
    attempts_left: int = Field(default=0, description="Guesses still allowed.")


class GuessState(State):
    attempts_left: int = 0
    solved: bool = False
