"""Reading a model reply: its final answer, and the JSON objects written in it.

`actions.py` decides which object is the action; this module only reads text, by the
rules docs/replies.md states: (1) reasoning up to the last closing tag is dropped
(`REASONING_DELIMITERS`), and a reply that ended inside it or was cut off is no
action; (2) every top-level `{...}` is found, an object that never closes is
remembered, never completed; (3) near-JSON is read only by a grammar (JSON5, then a
Python literal of JSON values), never guessed at, and two objects are never merged
(`json-repair` was not chosen because it always returns something); (4) tool calls
written as text are read in the common formats (call-tool object, Hermes/Qwen,
OpenAI's wire form, Llama's `<function=name>`).

Bounded: `MAX_DEPTH`, the last `MAX_OBJECTS` objects, `MAX_REPAIR_CHARS` per span for
the fallback parsers; no parser's recursion error escapes.
"""

from __future__ import annotations

import ast
import functools
import json
import re
from dataclasses import dataclass
from typing import Any

import json5

from openenv_v1.core.episode.frames import nested_deeper_than

REASONING_DELIMITERS: tuple[tuple[str, str], ...] = (
    ("<think>", "</think>"),  # Qwen3, DeepSeek-R1, QwQ, Phi-4-reasoning, SmolLM3
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
    ("<thought>", "</thought>"),
    ("<seed:think>", "</seed:think>"),  # Seed-OSS
    ("[THINK]", "[/THINK]"),  # Magistral
    ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("<|START_THINKING|>", "<|END_THINKING|>"),  # Command A Reasoning
)
"""Opening and closing tags of reasoning blocks in the text of current open models."""

MAX_DEPTH = 64
"""Deepest nesting of a value read from a reply (no env action is deeper)."""
MAX_OBJECTS = 100
"""Most objects read from one reply: its last ones (the final answer is among them)."""
MAX_REPAIR_CHARS = 10_000
"""Longest span the near-JSON parsers (JSON5, Python literal) are tried on: `json5`
is pure Python, about 35 µs a character here, and a reply is read on the eval's event
loop (verifiers 0.4)."""

UNCLOSED_REASONING = (
    "your reply ended inside its reasoning ({tag} was never closed by {close}); "
    "finish the reasoning and end the reply with the action"
)
CUT_OFF = (
    "your reply was cut off at the length limit before it ended; keep it shorter "
    "and end it with the action"
)
ONLY_REASONING = "your reply held only reasoning; end it with the action"
UNCLOSED_OBJECT = (
    "the last JSON object in your reply is not closed (was it cut off?); write the "
    "whole action"
)


class InvalidAction(ValueError):
    """The reply is not a valid action; `str()` says what to fix."""


def final_answer(
    reply: str,
    delimiters: tuple[tuple[str, str], ...] = REASONING_DELIMITERS,
    finish_reason: str | None = None,
) -> str:
    """The reply less its reasoning (rule 1); `InvalidAction` when the reply ended
    inside its reasoning, was cut off, or held nothing else."""
    end, had_reasoning = 0, False
    for _, close in _patterns(delimiters):
        for match in close.finditer(reply):
            had_reasoning = True
            end = max(end, match.end())
    answer = reply[end:]
    for (tag, close), (opening, _) in zip(
        delimiters, _patterns(delimiters), strict=True
    ):
        if opening.search(answer):
            raise InvalidAction(UNCLOSED_REASONING.format(tag=tag, close=close))
    if finish_reason == "length":
        raise InvalidAction(CUT_OFF)
    if not answer.strip():
        raise InvalidAction(ONLY_REASONING if had_reasoning else "the reply was empty")
    return answer.strip()


@functools.lru_cache(maxsize=16)
def _patterns(
    delimiters: tuple[tuple[str, str], ...],
) -> list[tuple[re.Pattern[str], re.Pattern[str]]]:
    return [(_tag_pattern(tag), _tag_pattern(close)) for tag, close in delimiters]


def _tag_pattern(tag: str) -> re.Pattern[str]:
    """A markup tag (`<think>`, `<|END_THINKING|>`) matches in any case; any other
    (Magistral's `[THINK]`) only as written: a word in square brackets is also how
    many envs take an action (Wordle's `[think]` is a guess, seen at scale)."""
    flags = re.I if tag.startswith("<") else 0
    return re.compile(re.escape(tag), flags)


@dataclass(frozen=True)
class Found:
    """A JSON object of the answer: its value, where it was, and the tool call it
    writes (name, arguments) when it has one of the tool-call shapes."""

    value: dict[str, Any]
    start: int
    end: int
    call: tuple[str, Any] | None = None


@dataclass(frozen=True)
class Objects:
    found: list[Found]
    unclosed: int | None = None
    """Where an object that never closes opens (after every found object)."""

    def unclosed_after(self, end: int) -> bool:
        return self.unclosed is not None and self.unclosed >= end


_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>\s*$")
_LOOKS_LIKE_OBJECT = re.compile(r"""\{\s*(["'][^"'\n]{0,200}["']|\w+)\s*:""")


def find_objects(answer: str) -> Objects:
    """The answer's top-level JSON objects in order (rules 2 to 4)."""
    spans, unclosed = _spans(answer)
    found = []
    for start, end in spans[-MAX_OBJECTS:]:
        value = decode(answer[start:end])
        if not isinstance(value, dict):
            continue
        tag = _FUNCTION_TAG.search(answer, 0, start)
        call = (tag.group(1), value) if tag else as_call(value)
        found.append(Found(value, start, end, call))
    if unclosed is not None and not _LOOKS_LIKE_OBJECT.match(answer, unclosed):
        unclosed = None  # a stray brace in prose, not an object
    return Objects(found, unclosed)


def _spans(text: str) -> tuple[list[tuple[int, int]], int | None]:
    """Top-level balanced `{...}` spans (quotes respected), and the start of one that
    never closes (nothing after it can be told apart from its inside)."""
    spans: list[tuple[int, int]] = []
    depth, start, quote, escaped, last = 0, 0, "", False, ""
    for i, char in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char == "{":
            if depth == 0:
                start = i
            depth += 1
        elif depth == 0:
            continue
        elif char == '"' or (char == "'" and last in "{[,:"):
            # An apostrophe opens a string only where a value or key may start.
            quote = char
        elif char == "}":
            depth -= 1
            if depth == 0:
                spans.append((start, i + 1))
        if not char.isspace():
            last = char
    return spans, (start if depth else None)


def decode(text: str) -> Any:
    """A JSON value from `text` (JSON, else JSON5, else a Python literal of JSON
    values: rule 3), or None when none of them reads it. `InvalidAction` for a value
    nested deeper than `MAX_DEPTH`."""
    value: Any = _NOTHING
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidAction(_TOO_DEEP) from None
    except ValueError:
        if len(text) <= MAX_REPAIR_CHARS:
            value = _near_json(text)
    if value is _NOTHING:
        return None
    if nested_deeper_than(value, MAX_DEPTH):
        raise InvalidAction(_TOO_DEEP)
    return value


_TOO_DEEP = f"the reply nests values more than {MAX_DEPTH} levels deep"


_NOTHING = object()


def _near_json(text: str) -> Any:
    try:
        return json5.loads(text)
    except (ValueError, RecursionError, TypeError, OverflowError):
        pass
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOTHING
    return value if _json_like(value) else _NOTHING


def _json_like(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not (item is None or isinstance(item, (str, int, float, bool))):
            return False
    return True


_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id"})


def as_call(value: dict[str, Any]) -> tuple[str, Any] | None:
    """The tool call (name, arguments) an object writes in one of the tool-call
    shapes of rule 4, else None. Arguments written as a JSON string are decoded."""
    if isinstance(value.get("tool_name"), str):
        return value["tool_name"], value.get("arguments", {})
    function = value.get("function")
    if value.get("type") == "function" and isinstance(function, dict):
        value = function
    name = value.get("name")
    if not isinstance(name, str) or not value.keys() <= _CALL_KEYS:
        return None
    if "arguments" not in value and "parameters" not in value:
        return None
    arguments = value.get("arguments", value.get("parameters"))
    if isinstance(arguments, str):
        decoded = decode(arguments) if arguments.strip() else {}
        arguments = arguments if decoded is None else decoded
    return name, arguments


_FENCE = re.compile(r"```[a-zA-Z0-9_+.-]*[ \t]*\n?(.*?)```", re.S)


def unfenced(answer: str) -> str:
    """The content of the answer's last fenced block, or the answer when it has none."""
    blocks = _FENCE.findall(answer)
    return blocks[-1].strip() if blocks else answer


def whole_object(answer: str, objects: Objects) -> Found | None:
    """The object that is the whole answer (bare or alone in a fenced block)."""
    if len(objects.found) != 1:
        return None
    only = objects.found[0]
    body = unfenced(answer)
    if answer[only.start : only.end].strip() == body.strip():
        return only
    return None
