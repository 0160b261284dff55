"""A scripted Wordle player: guesses a word consistent with all the feedback in the
conversation, from the text a model sees ("You submitted [crane]." with its G/Y/X
row, "Invalid move: [xxxxx]"; plain or JSON-escaped newlines).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache, lru_cache

from english_words import get_english_words_set

_NL = r"(?:\\n|\n)"
_FEEDBACK = re.compile(
    rf"You submitted \[([a-z]{{5}})\]\.{_NL}Feedback:{_NL}[A-Z ]+{_NL}([GYX](?: [GYX]){{4}})"
)
_REFUSED = re.compile(r"Invalid move: \[([a-z]*)\]")


@cache
def _words() -> tuple[tuple[str, ...], frozenset[str]]:
    """(likely answers, every valid guess), both from the `english-words` lists."""

    def five(source: str) -> set[str]:
        words = get_english_words_set([source], alpha=True, lower=True)
        return {w for w in words if len(w) == 5 and w.isascii()}

    gcide, web2 = five("gcide"), five("web2")
    return tuple(sorted(gcide & web2)), frozenset(gcide | web2)


def feedback_for(secret: str, guess: str) -> str:
    """The G/Y/X row the game shows for `guess` when the answer is `secret`."""
    row = ["X"] * 5
    spare = Counter(s for s, g in zip(secret, guess, strict=True) if s != g)
    for i, (s, g) in enumerate(zip(secret, guess, strict=True)):
        if s == g:
            row[i] = "G"
        elif spare[g]:
            row[i] = "Y"
            spare[g] -= 1
    return "".join(row)


GUESSES_KEPT = 16_384
"""Boards whose guess and candidates are remembered: the solver is deterministic, so
a run of many seeds walks one tree of boards; each board's candidates are its parent
board's, filtered by its last row, and each guess is worked out once."""


def next_guess(conversation: str) -> str:
    """The next guess: the best-covering word consistent with every feedback row."""
    board = {w: row.replace(" ", "") for w, row in _FEEDBACK.findall(conversation)}
    refused = frozenset(_REFUSED.findall(conversation))
    return _guess(tuple(board.items()), refused)


@lru_cache(maxsize=GUESSES_KEPT)
def _guess(board: tuple[tuple[str, str], ...], refused: frozenset[str]) -> str:
    played = {w for w, _ in board}
    candidates = _candidates(board, refused) or [
        w for w in _words()[0] if w not in played and w not in refused
    ]
    letters = Counter(c for w in candidates for c in set(w))
    return max(candidates, key=lambda w: (sum(letters[c] for c in set(w)), w))


@lru_cache(maxsize=GUESSES_KEPT)
def _candidates(
    board: tuple[tuple[str, str], ...], refused: frozenset[str]
) -> tuple[str, ...]:
    """The likely answers not refused, not played and consistent with every row."""
    if not board:
        return tuple(w for w in _words()[0] if w not in refused)
    guess, row = board[-1]
    return tuple(
        w
        for w in _candidates(board[:-1], refused)
        if w != guess and feedback_for(w, guess) == row
    )
