"""Where a reset or step frame from the env server becomes what the episode uses.

The server is untrusted: `read_frame` either returns a `Frame` the core can use
without further checks (an object `observation` nested at most `MAX_NESTING` deep, a
`reward` that is None or a finite float, a bool `done`, finite named reward
`signals` from the metadata), or raises `MalformedFrame` naming the field, what it
held and what it must be. Before the client parses a frame, `guard_frames` checks its
envelope (decodable, a JSON object, a reply's `data` an object). A fault ends only the
episode that received it, keeping the reward earned before.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

from openenv_v1.core.episode.view import REWARD_SIGNAL_KEYS
from openenv_v1.core.errors import EnvFailure, remember_error_frame

MAX_NESTING = 100
"""The deepest nesting of objects and lists an observation may have."""
_SHOWN_CHARS = 60


class MalformedFrame(EnvFailure):
    """The env server sent a frame that breaks the contract above; `str()` names the
    fault (the field, what it held, what it must be)."""

    def __init__(self, fault: str) -> None:
        super().__init__(f"the env server sent a malformed result: {fault}")


@dataclass(frozen=True)
class Frame:
    """A validated reset or step result (see the module docstring)."""

    observation: dict[str, Any]
    reward: float | None
    done: bool
    signals: dict[str, float]


def read_frame(result: Any) -> Frame:
    """The validated frame of a client's reset or step result (OpenEnv's
    `StepResult`: `observation`, `reward`, `done`, `metadata`). Raises
    `MalformedFrame` on the first fault found."""
    observation = getattr(result, "observation", None)
    if observation is None:
        observation = {}
    if not isinstance(observation, dict):
        raise MalformedFrame(
            f"the observation must be a JSON object, got {_described(observation)}"
        )
    if nested_deeper_than(observation, MAX_NESTING):
        raise MalformedFrame(
            f"the observation is nested deeper than {MAX_NESTING} levels"
        )
    done = getattr(result, "done", False)
    if not isinstance(done, bool):
        raise MalformedFrame(f"`done` must be true or false, got {_described(done)}")
    reward = _finite(getattr(result, "reward", None), "the reward")
    signals = _signals(getattr(result, "metadata", None)) or _signals(
        observation.get("metadata")
    )
    return Frame(observation, reward, done, signals)


def guard_frames(client: Any) -> Any:
    """Make `client` (OpenEnv's WebSocket client: its `_receive` decodes each frame)
    raise `MalformedFrame` for a frame whose envelope is broken, and keep an error
    frame's data (`errors.remember_error_frame`). Returns the client; one without a
    `_receive` is returned as it is. The one patch of the client's private parts."""
    receive = getattr(client, "_receive", None)
    if receive is None or getattr(receive, "_guards_frames", False):
        return client

    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            frame = await receive(*args, **kwargs)
        except RecursionError as e:  # only `json.loads` recurses in `_receive`
            raise MalformedFrame(
                "the frame is nested too deep to decode (deeper than the JSON "
                f"decoder's limit of about {sys.getrecursionlimit()} levels; an "
                f"observation may nest at most {MAX_NESTING})"
            ) from e
        check_envelope(frame)
        if frame.get("type") == "error":
            remember_error_frame(client, frame.get("data"))
        return frame

    guarded._guards_frames = True  # type: ignore[attr-defined]
    client._receive = guarded
    return client


def check_envelope(frame: Any) -> None:
    """Raise `MalformedFrame` unless `frame` (a decoded WebSocket message) is a JSON
    object whose `data` is an object (an `error` frame's `data` is OpenEnv's to
    read)."""
    if not isinstance(frame, dict):
        raise MalformedFrame(
            f"the frame must be a JSON object, got {_described(frame)}"
        )
    if frame.get("type") == "error":
        return
    if "data" not in frame:
        raise MalformedFrame(
            f"the frame {_shown(frame)} has no `data` (a reply carries its result, "
            "the observation, reward and done of a step, in a `data` object)"
        )
    if not isinstance(frame["data"], dict):
        raise MalformedFrame(
            f"the frame's `data` must be a JSON object, got {_described(frame['data'])}"
        )


def _finite(value: Any, what: str) -> float | None:
    """`value` as a finite float (None stays None), or a `MalformedFrame`."""
    if value is None:
        return None
    if not isinstance(value, int | float):
        raise MalformedFrame(
            f"{what} must be a number or null, got {_described(value)}"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise MalformedFrame(f"{what} must be a finite number, got {_shown(value)}")
    return number


def _signals(metadata: Any) -> dict[str, float]:
    """The first reward-signal mapping of `metadata` (keys `REWARD_SIGNAL_KEYS`, in
    that order), every value checked to be a finite number."""
    if not isinstance(metadata, dict):
        return {}
    for key in REWARD_SIGNAL_KEYS:
        raw = metadata.get(key)
        if isinstance(raw, dict):
            signals = {}
            for name, value in raw.items():
                number = _finite(value, f"the reward signal {key}.{name}")
                if number is None:
                    raise MalformedFrame(
                        f"the reward signal {key}.{name} must be a number, got null"
                    )
                signals[str(name)] = number
            return signals
    return {}


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests objects and lists more than `limit` levels deep
    (walked without recursion, so any depth is safe to ask about)."""
    level = [value]
    for _ in range(limit):
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
        if not level:
            return False
    return True


def _described(value: Any) -> str:
    """What a fault says `value` was: its kind and, shortened, the value itself."""
    if value is None:
        return "null"
    kind = {
        str: "a string",
        list: "a list",
        bool: "a bool",
        int: "an integer",
        float: "a number",
        dict: "an object",
    }.get(type(value), type(value).__name__)
    return f"{kind} {_shown(value)}"


def _shown(value: Any) -> str:
    """`value` as the fault message quotes it: short, and a huge integer by its
    digit count (its text alone could be thousands of characters)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 64:
            try:
                digits = str(len(str(abs(value))))
            except ValueError:  # past Python's int-to-text limit
                digits = f"about {int(value.bit_length() * math.log10(2))}"
            return f"an integer of {digits} digits"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."
