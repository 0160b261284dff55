"""OpenEnv `Environment` around `WordleGame`; one instance per WebSocket session.

It serves a small Task API (OpenEnv's `TaskProvider`): splits `train` (200 games)
and `test` (20), task `index` of a split being the game of seed `SPLIT_SEEDS[split] +
index`; `reset(split=..., index=...)` plays it. A task's spec is its id and seed,
never the word.
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import EnvironmentMetadata

from wordle_env.game import MAX_GUESSES, WordleGame
from wordle_env.models import (
    WordleAction,
    WordleMessage,
    WordleObservation,
    WordleState,
)

RULES = (
    "You are Player 0 in Wordle.\n"
    "A secret 5-letter English word has been chosen. You have 6 guesses to find it.\n"
    "Submit a guess as a word in square brackets, e.g. [crane].\n"
    "After each guess you get feedback for every letter:\n"
    "  G = green: right letter, right position\n"
    "  Y = yellow: the letter is in the word, elsewhere\n"
    "  X = gray: the letter is not in the word\n"
    "An invalid guess earns a warning; two invalid guesses in a row end the game.\n"
    "Enter your first guess."
)


SPLITS = {"train": 200, "test": 20}
SPLIT_SEEDS = {"train": 1000, "test": 0}


def task_spec(split: str, index: int) -> dict[str, Any]:
    if split not in SPLITS:
        raise KeyError(f"no split {split!r}; the splits are {', '.join(SPLITS)}")
    if not 0 <= index < SPLITS[split]:
        raise IndexError(index)
    return {"id": f"{split}-{index}", "seed": SPLIT_SEEDS[split] + index}


class WordleEnvironment(Environment[WordleAction, WordleObservation, WordleState]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._game = WordleGame.new()
        self._messages: list[WordleMessage] = []
        self._state = WordleState(episode_id=str(uuid.uuid4()))

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        word: str | None = None,
        split: str | None = None,
        index: int | None = None,
        **kwargs: Any,
    ) -> WordleObservation:
        """New game. `seed` makes the secret reproducible; `word` fixes it (for tests);
        `split` and `index` play that task (its seed wins over `seed`)."""
        if split is not None:
            seed = task_spec(split, index or 0)["seed"]
        self._game = WordleGame.new(seed=seed, word=word)
        self._messages = [WordleMessage(id=-1, content=RULES, category="GAME")]
        self._state = WordleState(episode_id=episode_id or str(uuid.uuid4()))
        return self._observation(RULES, reward=0.0, done=False, info={})

    def step(
        self, action: WordleAction, timeout_s: float | None = None, **kwargs: Any
    ) -> WordleObservation:
        result = self._game.submit(action.message)
        self._messages.append(
            WordleMessage(id=0, content=action.message, category="PLAYER")
        )
        self._messages.append(
            WordleMessage(id=-1, content=result.text, category="GAME")
        )
        self._state.step_count += 1
        self._state.guesses = [g for g, _ in self._game.guesses]
        self._state.guesses_left = self._game.guesses_left
        self._state.solved = self._game.solved
        signals = {
            "greens": (result.feedback or "").count("G") / 5,
            "yellows": (result.feedback or "").count("Y") / 5,
            "correct": 1.0 if result.solved else 0.0,
            "valid": 1.0 if result.valid else 0.0,
        }
        return self._observation(
            result.text, reward=result.reward, done=result.done, info=signals
        )

    def _observation(
        self, prompt: str, *, reward: float, done: bool, info: dict[str, Any]
    ) -> WordleObservation:
        return WordleObservation(
            prompt=prompt,
            messages=list(self._messages),
            info=info,
            reward=reward,
            done=done,
            metadata={"reward_signals": info} if info else {},
        )

    @property
    def state(self) -> WordleState:
        return self._state

    # The Task API (OpenEnv's TaskProvider): discovery only, no side effects.
    def list_splits(self) -> list[dict[str, str]]:
        return [{"name": name, "type": name} for name in SPLITS]

    def num_tasks(self, split: str) -> int:
        task_spec(split, 0)
        return SPLITS[split]

    def list_tasks(self, split: str) -> list[dict[str, Any]]:
        return [task_spec(split, i) for i in range(self.num_tasks(split))]

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return task_spec(split, index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        indices = range(self.num_tasks(split))[start:stop]
        return [task_spec(split, i) for i in indices]

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="wordle",
            description=f"Offline Wordle: guess a 5-letter word in {MAX_GUESSES} tries.",
            version="0.1.0",
        )
