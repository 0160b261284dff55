"""Guess the number: an OpenEnv env laid out like a Hugging Face Space (test fixture)."""

from .models import GuessAction, GuessObservation, GuessState

__all__ = ["GuessAction", "GuessObservation", "GuessState"]
