"""Guess the number: an OpenEnv env whose server/ uses relative imports (test fixture)."""

from .models import GuessAction, GuessObservation, GuessState

__all__ = ["GuessAction", "GuessObservation", "GuessState"]
