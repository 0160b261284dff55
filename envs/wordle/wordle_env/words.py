"""The word lists: valid guesses and the pool secrets are drawn from.

Both come from the `english-words` package. Any five-letter word in either of its
dictionaries (GCIDE, Webster's 2nd) is a valid guess; secrets come only from words in
both, which leaves out most of the oddities a single dictionary carries.
"""

from functools import cache

from english_words import get_english_words_set

WORD_LENGTH = 5


def _five_letter(source: str) -> frozenset[str]:
    words = get_english_words_set([source], alpha=True, lower=True)
    return frozenset(w for w in words if len(w) == WORD_LENGTH and w.isascii())


@cache
def valid_guesses() -> frozenset[str]:
    return _five_letter("gcide") | _five_letter("web2")


@cache
def secret_pool() -> tuple[str, ...]:
    """Sorted, so a seed maps to the same secret on every machine."""
    return tuple(sorted(_five_letter("gcide") & _five_letter("web2")))


# Built at import, not by the first session: sessions opened at once would each build
# them (`functools.cache` does not make concurrent first callers wait; 0.4 s of CPU
# apiece, 64 sessions a server), and a server forked after the import (openenv-v1's
# template) shares them.
secret_pool()
valid_guesses()
