"""Wire models of the sums env."""

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class SumAction(Action):
    answer: int = Field(description="The sum, a whole number.")


class SumObservation(Observation):
    question: str = Field(default="", description="The sum to work out.")
    nonce: int = Field(default=0, description="Drawn from the reset's seed.")
    tries_left: int = Field(default=0, description="Answers still allowed.")


class SumState(State):
    tries_left: int = 0
