"""Guess a number from 1 to 20 in 4 tries; the number is `seed * 7 % 20 + 1`
(seed 1: 8, seed 2: 15; no seed counts as 0). A right guess pays 1.0 and ends the
episode; a wrong one pays 0.0 and says "higher" or "lower"; the 4th wrong guess ends
it."""

from typing import Any

from openenv.core.env_server.interfaces import Environment

try:  # installed as the `future_python_env` package
    from ..models import GuessAction, GuessObservation, GuessState
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from models import GuessAction, GuessObservation, GuessState

MAX_GUESSES = 4


def secret_for(seed: int | None) -> int:
    return (seed or 0) * 7 % 20 + 1


class GuessEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._secret = secret_for(None)
        self._state = GuessState(attempts_left=MAX_GUESSES)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._secret = secret_for(seed)
        self._state = GuessState(episode_id=episode_id, attempts_left=MAX_GUESSES)
        return GuessObservation(
            message=f"Guess a whole number from 1 to 20. You have {MAX_GUESSES} guesses.",
            attempts_left=MAX_GUESSES,
            done=False,
            reward=0.0,
        )

    def step(
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:
        state = self._state
        state.step_count += 1
        state.attempts_left -= 1
        if action.guess == self._secret:
            state.solved = True
            message = f"{action.guess} is right!"
        elif state.attempts_left == 0:
            message = f"Out of guesses; it was {self._secret}."
        elif action.guess < self._secret:
            message = f"Higher than {action.guess}."
        else:
            message = f"Lower than {action.guess}."
        return GuessObservation(
            message=message,
            attempts_left=state.attempts_left,
            done=state.solved or state.attempts_left == 0,
            reward=1.0 if state.solved else 0.0,
        )

    @property
    def state(self) -> GuessState:
        return self._state
