"""Benchmark: model replies in the styles of real model families, read by our parser
and by verifiers' built-in OpenEnv taskset's, side by side.

    uv run python benchmarks/replies.py [--show-misses]
    UV_PROJECT_ENVIRONMENT=.venv-vf04 uv run --no-sync python benchmarks/replies.py

The corpus is generated here (`corpus()`): for three action contracts (Wordle's one
string field, a board move with an integer and an optional boolean, an MCP env's
tools) and a few intended actions each, every reply style below, each labelled with
the action it means or with "not an action":

- plain: bare JSON, a fenced block, prose around it, markdown (`**Move:**`, inline
  code), a heading and a fence;
- reasoning (Qwen3 / DeepSeek-R1 / Magistral / Command style): a closed block holding
  another (decoy) action before the answer, the opening tag left to the template, a
  block cut off before it closes (not an action), a reply cut at the length limit
  (`finish_reason: "length"`: not an action; a cut reply that still parses is left
  out, being a rule of ours rather than of meaning: tests/test_actions.py has it);
- several candidates: an example object then the answer, two fenced blocks, answer
  then an unrelated object;
- near-JSON: trailing comma, single quotes, unquoted keys, comments, Python `True` /
  `None`, numbers as strings;
- tool calls as text: Hermes/Qwen `<tool_call>`, bare `{"name", "arguments"}`,
  Llama's `parameters` and `<function=...>`;
- broken: a truncated object, an empty reply, prose only (not actions), 5,000 `[`.

What a parser's output does is judged as the env would take it: the action dict is
validated by a pydantic model of the env's action in lax mode (what an OpenEnv server
does), and for Wordle the guess is the env's own reading of the message (its last
bracketed word). Per parser: **recovered** (the intended action is played),
**silent wrong** (another action is played: worse than an error), **wrongly
refused** (an intended action is not played), **crashed** (the parser raised
something other than a refusal), and not-actions refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_v1.core.episode.actions import InvalidAction, parse_action  # noqa: E402
from openenv_v1.core.episode.schema import CALL_TOOL_SCHEMA, ActionSpec, Tool  # noqa: E402

WORDLE = ActionSpec(
    {
        "title": "WordleAction",
        "type": "object",
        "additionalProperties": False,
        "properties": {"metadata": {"type": "object"}, "message": {"type": "string"}},
        "required": ["message"],
    }
)
BOARD = ActionSpec(
    {
        "title": "BoardAction",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "metadata": {"type": "object"},
            "column": {"type": "integer"},
            "drop": {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        },
        "required": ["column"],
    }
)
COUNTER = ActionSpec(
    CALL_TOOL_SCHEMA,
    (
        Tool(
            "add",
            "Add n.",
            {
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
            },
        ),
        Tool("peek", "Peek.", {"type": "object", "properties": {}}),
    ),
)


class _Board(BaseModel):
    model_config = ConfigDict(extra="forbid")
    metadata: dict[str, Any] = {}
    column: int
    drop: bool | None = None


class _Add(BaseModel):
    n: int


_BRACKETED = re.compile(r"\[([^\[\]]+)\]")


def env_takes(spec_name: str, action: Any) -> Any:
    """What the env plays for a parser's action dict (None: it refuses it)."""
    if not isinstance(action, dict):
        return None
    try:
        if spec_name == "wordle":
            message = action.get("message")
            if not isinstance(message, str) or set(action) - {"message", "metadata"}:
                return None
            found = _BRACKETED.findall(message)
            word = (found[-1] if found else message).strip().lower()
            return word if re.fullmatch(r"[a-z]{5}", word) else None
        if spec_name == "board":
            board = _Board.model_validate(action)
            return (board.column, board.drop)
        name = action.get("tool_name")
        arguments = action.get("arguments") or {}
        if action.get("type", "call_tool") != "call_tool" or name not in (
            "add",
            "peek",
        ):
            return None
        if name == "add":
            return ("add", _Add.model_validate(arguments).n)
        return ("peek",)
    except (ValidationError, TypeError, AttributeError):
        return None


@dataclass(frozen=True)
class Case:
    spec: str
    style: str
    reply: str
    intended: Any
    """What the env should play (as `env_takes` gives it); None: not an action."""
    finish_reason: str | None = None


def _j(value: Any) -> str:
    return json.dumps(value)


def _styles(
    action: str, decoy: str, call: str, decoy_call: str
) -> Iterator[tuple[str, str, bool, str | None]]:
    """(style, reply, is the action, finish_reason) for one action's JSON `action`,
    a decoy action `decoy`, and the same as tool calls written as text."""
    yield "bare JSON", action, True, None
    yield "fenced", f"```json\n{action}\n```", True, None
    yield "prose before", f"I'll go with this move.\n{action}", True, None
    yield "prose after", f"{action}\nThat should work.", True, None
    yield (
        "prose both sides",
        f"After looking at the board, my action is {action} which keeps options open.",
        True,
        None,
    )
    yield "markdown bold", f"**Move:** `{action}`", True, None
    yield "markdown heading + fence", f"### Action\n\n```\n{action}\n```\n", True, None
    yield (
        "think + decoy",
        f"<think>Maybe {decoy}? No, that loses.</think>\n{action}",
        True,
        None,
    )
    yield (
        "think, no opening tag",
        f"Option: {decoy}. Not great.\n</think>\n\n{action}",
        True,
        None,
    )
    yield (
        "think + fenced answer",
        f"<think>{decoy} is tempting</think>\n```json\n{action}\n```",
        True,
        None,
    )
    yield "reasoning tag", f"<reasoning>{decoy}</reasoning>{action}", True, None
    yield (
        "thinking tag",
        f"<thinking>first {decoy}</thinking>\n\nAnswer: {action}",
        True,
        None,
    )
    yield "magistral tag", f"[THINK]{decoy}[/THINK]{action}", True, None
    yield (
        "two think blocks",
        f"<think>{decoy}</think><think>hmm</think>{action}",
        True,
        None,
    )
    yield (
        "example then answer",
        f"The format is {decoy}. My answer:\n```json\n{action}\n```",
        True,
        None,
    )
    yield (
        "two fenced blocks",
        f"```json\n{decoy}\n```\nActually:\n```json\n{action}\n```",
        True,
        None,
    )
    yield (
        "answer then unrelated object",
        f'{action}\nMy plan: {{"strategy": "center"}}',
        True,
        None,
    )
    yield "tool_call tag", f"<tool_call>\n{call}\n</tool_call>", True, None
    yield "bare tool call", call, True, None
    yield (
        "think + tool_call",
        f"<think><tool_call>{decoy_call}</tool_call>?</think>\n<tool_call>{call}</tool_call>",
        True,
        None,
    )
    yield "think cut off", f"<think>I think {decoy} is right because", False, "length"
    yield "think never closed", f"<think>Let me try {decoy}", False, None
    yield "truncated object", action[: len(action) // 2], False, None
    yield "truncated after decoy", f"{decoy}\nNo wait: {action[:-2]}", False, None


def _near(spec_name: str, value: Any) -> Iterator[tuple[str, str]]:
    """Near-JSON forms of one action."""
    if spec_name == "wordle":
        message = value["message"]
        yield "single quotes", f"{{'message': '{message}'}}"
        yield "trailing comma", f'{{"message": "{message}",}}'
        yield "unquoted key", f'{{message: "{message}"}}'
        yield "comment", f'{{\n  // my guess\n  "message": "{message}"\n}}'
    elif spec_name == "board":
        column = value["column"]
        yield "string number", f'{{"column": "{column}"}}'
        yield "trailing comma", f'{{"column": {column},}}'
        yield "single quotes", f"{{'column': {column}}}"
        yield (
            "python literals",
            f"{{'column': {column}, 'drop': True}}"
            if value.get("drop")
            else f"{{'column': {column}, 'drop': None}}",
        )
        yield "unquoted key", f"{{column: {column}}}"
        yield "float integer", f'{{"column": {column}.0}}'
    else:
        n = value["arguments"]["n"]
        yield "string number", f'{{"tool_name": "add", "arguments": {{"n": "{n}"}}}}'
        yield "trailing comma", f'{{"tool_name": "add", "arguments": {{"n": {n},}},}}'
        yield "single quotes", f"{{'tool_name': 'add', 'arguments': {{'n': {n}}}}}"
        yield "llama parameters", f'{{"name": "add", "parameters": {{"n": {n}}}}}'
        yield "function tag", f'<function=add>{{"n": {n}}}</function>'


def corpus() -> list[Case]:
    cases: list[Case] = []
    words = ["crane", "slate", "pious", "tramp", "gloat", "mirth"]
    for index, word in enumerate(words):
        decoy = words[index - 1]
        action = {"message": f"[{word}]"}
        wrong = {"message": f"[{decoy}]"}
        call, decoy_call = ({"name": "act", "arguments": a} for a in (action, wrong))
        for style, reply, is_action, finish in _styles(
            _j(action), _j(wrong), _j(call), _j(decoy_call)
        ):
            cases.append(
                Case("wordle", style, reply, word if is_action else None, finish)
            )
        for style, reply in _near("wordle", action):
            cases.append(Case("wordle", f"near-JSON: {style}", reply, word))
        cases.append(Case("wordle", "raw guess", f"[{word}]", word))
        cases.append(
            Case(
                "wordle",
                "think + raw guess",
                f"<think>[{decoy}]? no.</think>\n[{word}]",
                word,
            )
        )
        cases.append(
            Case(
                "wordle", "raw think cut off", f"<think>maybe [{decoy}]", None, "length"
            )
        )
    for column, drop in [
        (0, None),
        (3, None),
        (4, True),
        (6, False),
        (2, None),
        (5, True),
    ]:
        action = (
            {"column": column} if drop is None else {"column": column, "drop": drop}
        )
        wrong = {"column": (column + 3) % 7}
        call, decoy_call = ({"name": "act", "arguments": a} for a in (action, wrong))
        intended = (column, drop)
        for style, reply, is_action, finish in _styles(
            _j(action), _j(wrong), _j(call), _j(decoy_call)
        ):
            cases.append(
                Case("board", style, reply, intended if is_action else None, finish)
            )
        for style, reply in _near("board", action):
            # Only the Python-literal form writes `drop` (True, or None).
            near = (column, True if style == "python literals" and drop else None)
            cases.append(Case("board", f"near-JSON: {style}", reply, near))
        cases.append(
            Case(
                "board", "prose only", f"I would drop a piece in column {column}.", None
            )
        )
    for n in [1, 2, 5, 7, 10, 42]:
        action = {"tool_name": "add", "arguments": {"n": n}}
        wrong = {"tool_name": "add", "arguments": {"n": n + 1}}
        call = {"name": "add", "arguments": {"n": n}}
        decoy_call = {"name": "add", "arguments": {"n": n + 1}}
        for style, reply, is_action, finish in _styles(
            _j(action), _j(wrong), _j(call), _j(decoy_call)
        ):
            cases.append(
                Case("counter", style, reply, ("add", n) if is_action else None, finish)
            )
        for style, reply in _near("counter", action):
            cases.append(Case("counter", f"near-JSON: {style}", reply, ("add", n)))
        cases.append(
            Case("counter", "prose only", f"I will add {n} to the counter.", None)
        )
    for spec in ("board", "counter"):
        cases.append(Case(spec, "empty", "", None))
        cases.append(Case(spec, "5,000 [", "[" * 5_000, None))
    return cases


SPECS = {"wordle": WORDLE, "board": BOARD, "counter": COUNTER}


def ours(case: Case) -> Any:
    return parse_action(case.reply, SPECS[case.spec], finish_reason=case.finish_reason)


def builtin_parser() -> tuple[str, Callable[[Case], Any]] | None:
    """verifiers' built-in OpenEnv taskset's parser, from the installed line: a
    function on 0.4, a method of its user simulator on 0.2. It receives the action
    schema as the taskset does (the call-tool schema for MCP envs)."""
    try:
        from verifiers.v1.tasksets.openenv import taskset
    except ImportError:
        return None
    import verifiers

    version = getattr(verifiers, "__version__", "?")
    function = getattr(taskset, "parse_action", None)
    if function is not None:
        return version, lambda case: function(case.reply, SPECS[case.spec].schema)
    user = next(
        cls
        for cls in vars(taskset).values()
        if isinstance(cls, type) and hasattr(cls, "parse_action")
    )
    return version, lambda case: user.parse_action(
        SimpleNamespace(action_schema=SPECS[case.spec].schema), case.reply
    )


@dataclass
class Tally:
    recovered: int = 0
    silent_wrong: int = 0
    wrongly_refused: int = 0
    refused_right: int = 0
    crashed: int = 0

    def add(self, case: Case, parse: Callable[[Case], Any], misses: list[str]) -> None:
        try:
            output = parse(case)
        except (InvalidAction, ValueError) as e:
            if not isinstance(e, InvalidAction) and type(e) is not ValueError:
                self.crashed += 1
                misses.append(
                    f"crashed ({type(e).__name__}): {case.spec} / {case.style}"
                )
                return
            output = None
        except Exception as e:  # a parser crash, counted, as a real eval would see it
            self.crashed += 1
            misses.append(f"crashed ({type(e).__name__}): {case.spec} / {case.style}")
            return
        played = env_takes(case.spec, output)
        if case.intended is None:
            if played is None:
                self.refused_right += 1
            else:
                self.silent_wrong += 1
                misses.append(f"silent wrong {played!r}: {case.spec} / {case.style}")
        elif played == case.intended:
            self.recovered += 1
        elif played is None:
            self.wrongly_refused += 1
            misses.append(f"refused: {case.spec} / {case.style}")
        else:
            self.silent_wrong += 1
            misses.append(
                f"silent wrong {played!r} for {case.intended!r}: {case.spec} / {case.style}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show-misses", action="store_true")
    args = parser.parse_args()
    cases = corpus()
    actions = sum(1 for c in cases if c.intended is not None)
    print(
        f"{len(cases)} replies: {actions} actions, {len(cases) - actions} not actions"
    )
    parsers: list[tuple[str, Callable[[Case], Any]]] = [("openenv-v1", ours)]
    builtin = builtin_parser()
    if builtin is not None:
        parsers.append((f"verifiers {builtin[0]} built-in", builtin[1]))
    sys.setrecursionlimit(1_000)  # Python's default, whatever an import changed
    print(
        f"{'parser':<28} {'recovered':>9} {'silent wrong':>12} {'wrongly refused':>15} {'crashed':>7} {'not-actions refused':>19}"
    )
    for name, parse in parsers:
        tally, misses = Tally(), []
        for case in cases:
            tally.add(case, parse, misses)
        print(
            f"{name:<28} {tally.recovered:>5}/{actions:<3} {tally.silent_wrong:>12} "
            f"{tally.wrongly_refused:>15} {tally.crashed:>7} "
            f"{tally.refused_right:>15}/{len(cases) - actions:<3}"
        )
        if args.show_misses:
            for miss in misses:
                print(f"    {miss}")


if __name__ == "__main__":
    main()
