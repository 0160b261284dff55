"""The task of an episode, fixed by its seed: `What is A + B?` with A = 10 + seed * 7
% 20 and B = 20 + seed * 5 % 10 (seed 1: 17 + 25 = 42; no seed counts as 0)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class AppleTask:
    left: int
    right: int

    @property
    def answer(self) -> int:
        return self.left + self.right

    @property
    def question(self) -> str:
        return f"What is {self.left} + {self.right}?"


def task_for(seed: int | None) -> AppleTask:
    seed = seed or 0
    return AppleTask(left=10 + seed * 7 % 20, right=20 + seed * 5 % 10)
