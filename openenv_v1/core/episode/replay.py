"""What an episode saw, kept so that a lost session can be rebuilt and checked.

An env given the same reset kwargs (every task carries a fixed seed) and the same
actions answers the same, so a fresh session reset and sent the same actions is where
the old one was, provided every answer matches. `ReplayLog` records the reset's frame
and each answered action (its frame, or the code it was refused with). Answers are
compared as canonical JSON less id fields (`ID_FIELDS`, at any depth); the first
difference is a `ReplayDiverged` naming the step and the field. The log keeps each
answer as its canonical JSON text: one string a step, read back only to compare
answers whose texts differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv_v1.core.errors import EnvFailure

if TYPE_CHECKING:
    from openenv_v1.core.episode.frames import Frame

__all__ = ["ID_FIELDS", "ReplayDiverged", "ReplayLog", "ResumeFailed", "canonical"]

ID_FIELDS = frozenset({"episode_id", "session_id", "request_id"})
"""Observation keys left out of the comparison, at any depth: ids a server makes up
per session, which no replay reproduces."""
_SHOWN_CHARS = 80


class ResumeFailed(EnvFailure):
    """A lost session could not be resumed; `str()` says why."""


class ReplayDiverged(ResumeFailed):
    """A replay met an answer other than the one the episode saw."""


@dataclass(frozen=True)
class Exchange:
    """One answered action: what was sent and what came back (`canonical` of its
    frame, or of the server's error code when it refused the action)."""

    action: dict[str, Any]
    answer: str


@dataclass
class ReplayLog:
    """The reset kwargs and every answer the episode acted on, in order."""

    reset_kwargs: dict[str, Any]
    reset: str = ""
    steps: list[Exchange] = field(default_factory=list)

    def saw_reset(self, frame: Frame) -> None:
        self.reset = canonical(frame)
        self.steps.clear()

    def saw_step(self, action: dict[str, Any], frame: Frame) -> None:
        self.steps.append(Exchange(action, canonical(frame)))

    def saw_refusal(self, action: dict[str, Any], code: str) -> None:
        """The server refused `action` with error `code` (it reached the env)."""
        self.steps.append(Exchange(action, _text({"refused": code})))

    def check(self, index: int, answer: Frame | str) -> None:
        """Raise `ReplayDiverged` unless `answer` (a frame, or a refusal's error
        code) is what the episode saw at `index`: 0 the reset, k its k-th step."""
        seen_text = self.reset if index == 0 else self.steps[index - 1].answer
        got_text = (
            _text({"refused": answer}) if isinstance(answer, str) else canonical(answer)
        )
        if got_text == seen_text:
            return
        seen, got = json.loads(seen_text), json.loads(got_text)
        if got == seen:  # the same values, written otherwise (1 and 1.0)
            return
        where = "the reset" if index == 0 else f"step {index}"
        path, before, now = _first_difference(seen, got)
        raise ReplayDiverged(
            f"the replay on a fresh session diverged at {where}: `{path}` was "
            f"{_shown(before)}, the replay got {_shown(now)} (an env that answers "
            "otherwise given the same reset kwargs and actions cannot be resumed; "
            f"compared without the id fields {', '.join(sorted(ID_FIELDS))})"
        )


def canonical(frame: Frame) -> str:
    """The frame as compared: observation (less `ID_FIELDS`), reward and done, as
    JSON text with sorted keys."""
    value = {
        "observation": frame.observation,
        "reward": frame.reward,
        "done": frame.done,
    }
    text = _text(value)
    if any(f'"{name}"' in text for name in ID_FIELDS):
        text = _text({**value, "observation": _without_ids(frame.observation)})
    return text


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in ID_FIELDS}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


_MISSING = object()


def _first_difference(seen: Any, got: Any, path: str = "") -> tuple[str, Any, Any]:
    """The first path at which `seen` and `got` differ, and the two values there."""
    if isinstance(seen, dict) and isinstance(got, dict):
        for key in [*seen, *(k for k in got if k not in seen)]:
            a, b = seen.get(key, _MISSING), got.get(key, _MISSING)
            if a != b:
                return _first_difference(a, b, f"{path}.{key}" if path else str(key))
    if isinstance(seen, list) and isinstance(got, list) and len(seen) == len(got):
        for i, (a, b) in enumerate(zip(seen, got, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return path or "(the answer)", seen, got


def _shown(value: Any) -> str:
    if value is _MISSING:
        return "absent"
    text = json.dumps(value, sort_keys=True, default=repr)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 3]}..."
