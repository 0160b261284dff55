"""Pure Wordle rules: scoring a guess, the invalid-guess allowance, rewards.

Rules follow TextArena's Wordle as the `openenv/wordle` Space plays it: six guesses,
a guess is a five-letter English word (square brackets optional), an invalid guess
earns one warning and a second one in a row ends the game.

Rewards: 1.0 on the step that solves the word. A game that ends unsolved pays partial
credit on its last step: half the best guess's score, where a guess scores
(greens + yellows / 2) / 5. Every other step pays 0.0, so an episode's step rewards
sum to exactly one of those two values.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field

from wordle_env.words import WORD_LENGTH, secret_pool, valid_guesses

MAX_GUESSES = 6
GREEN, YELLOW, GRAY = "G", "Y", "X"
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")


def score_guess(secret: str, guess: str) -> str:
    """Feedback letters for `guess` against `secret`, e.g. "GYXXX".

    Repeated letters are matched the standard way: greens first, then yellows while
    unmatched copies of the letter remain in the secret.
    """
    marks = [GRAY] * WORD_LENGTH
    unmatched = Counter()
    for i, (s, g) in enumerate(zip(secret, guess, strict=True)):
        if s == g:
            marks[i] = GREEN
        else:
            unmatched[s] += 1
    for i, g in enumerate(guess):
        if marks[i] != GREEN and unmatched[g] > 0:
            marks[i] = YELLOW
            unmatched[g] -= 1
    return "".join(marks)


def extract_guess(message: str) -> str:
    """The word a player submitted: the last bracketed token, else the whole message."""
    found = _BRACKETED.findall(message)
    word = found[-1] if found else message
    return word.strip().lower()


@dataclass(frozen=True)
class GuessResult:
    """What one submitted message did to the game."""

    guess: str
    valid: bool
    feedback: str | None
    """Feedback letters for a valid guess, None for an invalid one."""
    text: str
    """The game's answer, as the player reads it."""
    reward: float
    done: bool
    solved: bool


@dataclass
class WordleGame:
    secret: str
    guesses: list[tuple[str, str]] = field(default_factory=list)
    """(guess, feedback) for each valid guess so far."""
    invalid_streak: int = 0
    done: bool = False
    solved: bool = False

    @classmethod
    def new(cls, seed: int | None = None, word: str | None = None) -> WordleGame:
        """Start a game. `seed` picks the secret deterministically; `word` fixes it."""
        if word is not None:
            word = word.strip().lower()
            if word not in valid_guesses():
                raise ValueError(
                    f"word={word!r} is not a five-letter word in the dictionary"
                )
            return cls(secret=word)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        return cls(secret=rng.choice(secret_pool()))

    @property
    def guesses_left(self) -> int:
        return MAX_GUESSES - len(self.guesses)

    def partial_credit(self) -> float:
        best = 0.0
        for _, feedback in self.guesses:
            score = (feedback.count(GREEN) + feedback.count(YELLOW) / 2) / WORD_LENGTH
            best = max(best, score)
        return best / 2

    def submit(self, message: str) -> GuessResult:
        if self.done:
            raise RuntimeError("the game is over; reset to play again")
        guess = extract_guess(message)
        problem = self._problem(guess)
        if problem is not None:
            return self._invalid(guess, problem)
        self.invalid_streak = 0
        feedback = score_guess(self.secret, guess)
        self.guesses.append((guess, feedback))
        board = f"{' '.join(guess.upper())}\n{' '.join(feedback)}"
        if feedback == GREEN * WORD_LENGTH:
            self.done = self.solved = True
            text = f"You submitted [{guess}].\nFeedback:\n{board}\n\nCongratulations! You guessed the word."
            return GuessResult(guess, True, feedback, text, 1.0, True, True)
        if self.guesses_left == 0:
            self.done = True
            text = (
                f"You submitted [{guess}].\nFeedback:\n{board}\n\n"
                f"You are out of guesses. The word was [{self.secret}]."
            )
            return GuessResult(
                guess, True, feedback, text, self.partial_credit(), True, False
            )
        text = (
            f"You submitted [{guess}].\nFeedback:\n{board}\n\n"
            f"You have {self.guesses_left} guesses left."
        )
        return GuessResult(guess, True, feedback, text, 0.0, False, False)

    def _problem(self, guess: str) -> str | None:
        if len(guess) != WORD_LENGTH or not guess.isalpha():
            return f"[{guess}] is not a {WORD_LENGTH}-letter word"
        if guess not in valid_guesses():
            return f"[{guess}] is not an English word"
        if any(guess == g for g, _ in self.guesses):
            return f"you already guessed [{guess}]"
        return None

    def _invalid(self, guess: str, problem: str) -> GuessResult:
        self.invalid_streak += 1
        if self.invalid_streak >= 2:
            self.done = True
            text = (
                f"Invalid move: {problem}. That is two invalid moves in a row, so the "
                f"game is over. The word was [{self.secret}]."
            )
            return GuessResult(
                guess, False, None, text, self.partial_credit(), True, False
            )
        text = (
            f"Invalid move: {problem}. Please resubmit a valid {WORD_LENGTH}-letter "
            "word in square brackets, e.g. [crane]. Another invalid move ends the game."
        )
        return GuessResult(guess, False, None, text, 0.0, False, False)
