"""Sums to answer, served with OpenEnv's Task API (`TaskProvider`).

Splits `train` (300 tasks) and `test` (60). Task `index` of a split asks for
`a + b` with `a = index + 1` and `b = 7` (train) or `b = 1000` (test); its spec (what
`task_range` answers) carries the answer, which the model must never be shown.
`reset(split=..., index=...)` picks the task (default `test`, 0). A right answer
pays 1.0 and ends the episode; a wrong one pays 0.5 and leaves `tries - 1` more
(default `tries` 2). The observation's `nonce` is drawn from the reset's seed
(random without one), so two rollouts reset with one seed show the same nonce.

Reset kwargs that make it behave like some real envs: `unscored` (steps give no
reward at all: None) and `scale` (rewards multiplied, e.g. out of a declared range).

`list_tasks` refuses, and `get_task_range` refuses more than 256 tasks at once: a
client must count and page, never load a whole split.
"""

import random
from typing import Any

from openenv.core.env_server.interfaces import Environment

try:  # installed as the `tasks_env` package
    from ..models import SumAction, SumObservation, SumState
except ImportError:  # run from the env's folder
    from models import SumAction, SumObservation, SumState

SPLITS = {"train": 300, "test": 60}
OFFSET = {"train": 7, "test": 1000}


def task_spec(split: str, index: int) -> dict[str, Any]:
    if split not in SPLITS:
        raise KeyError(split)
    if not 0 <= index < SPLITS[split]:
        raise IndexError(index)
    a, b = index + 1, OFFSET[split]
    return {"id": f"{split}-{index}", "a": a, "b": b, "answer": a + b}


class SumEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._spec = task_spec("test", 0)
        self._state = SumState()
        self._scale = 1.0
        self._unscored = False

    # --- the Task API ---
    def list_splits(self) -> list[dict[str, str]]:
        return [{"name": "train", "type": "train"}, {"name": "test", "type": "test"}]

    def num_tasks(self, split: str) -> int:
        return SPLITS[split]

    def list_tasks(self, split: str) -> list[Any]:
        raise RuntimeError("list_tasks loads a whole split: page with task_range")

    def get_task(self, split: str, index: int) -> dict[str, Any]:
        return task_spec(split, index)

    def get_task_range(
        self, split: str, start: int | None = None, stop: int | None = None
    ) -> list[dict[str, Any]]:
        start = 0 if start is None else start
        stop = SPLITS[split] if stop is None else min(stop, SPLITS[split])
        if stop - start > 256:
            raise RuntimeError("at most 256 tasks per task_range")
        return [task_spec(split, i) for i in range(start, stop)]

    # --- the episode ---
    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        split: str = "test",
        index: int = 0,
        tries: int = 2,
        scale: float = 1.0,
        unscored: bool = False,
        **kwargs: Any,
    ) -> SumObservation:
        self._spec = task_spec(split, index)
        self._scale, self._unscored = scale, unscored
        self._state = SumState(episode_id=episode_id, tries_left=tries)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        return SumObservation(
            question=f"What is {self._spec['a']} + {self._spec['b']}?",
            nonce=rng.randrange(10**9),
            tries_left=tries,
            done=False,
            reward=None,
        )

    def step(
        self, action: SumAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SumObservation:
        state = self._state
        state.step_count += 1
        state.tries_left -= 1
        right = action.answer == self._spec["answer"]
        reward = (1.0 if right else 0.5) * self._scale
        return SumObservation(
            question="Right." if right else "Wrong.",
            tries_left=state.tries_left,
            done=right or state.tries_left <= 0,
            reward=None if self._unscored else reward,
        )

    @property
    def state(self) -> SumState:
        return self._state
