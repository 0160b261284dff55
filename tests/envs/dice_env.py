"""A text env for tests that ignores its seed: each step rolls a die no seed fixes.

The reset always answers the same (`greeting`); each step's observation holds a fresh
`roll` from the OS's randomness and pays 0.5, and the third step ends the episode. An
episode replayed on a fresh session meets another roll at its first step, so it
cannot be resumed, and one lost before any step was answered can.
"""

import random
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

_ROLLS = random.SystemRandom()


class DiceAction(Action):
    message: str


class DiceObservation(Observation):
    greeting: str = ""
    roll: int | None = None


class DiceEnvironment(Environment[DiceAction, DiceObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> DiceObservation:
        self._state = State(episode_id=episode_id)
        return DiceObservation(greeting="roll the die", done=False, reward=0.0)

    def step(self, action: DiceAction, **kwargs: Any) -> DiceObservation:
        self._state.step_count += 1
        return DiceObservation(
            roll=_ROLLS.randint(1, 10**9),
            done=self._state.step_count >= 3,
            reward=0.5,
        )

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    DiceEnvironment, DiceAction, DiceObservation, env_name="dice", max_concurrent_envs=8
)
