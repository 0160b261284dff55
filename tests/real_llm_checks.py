"""Checks of what a model was sent and how episodes ended, shared by both lines' tests.

- `assert_conversation_grows`: each model request of one rollout repeats the
  previous request's messages exactly (same tools too) and adds to them, starting
  with the reply the model gave to it, so a trainer that keeps token ids per turn
  sees one growing sequence;
- `assert_one_branch`: a trace's message graph is one chain (verifiers forks a
  branch where a request rewrites an earlier turn);
- `assert_episodes_ended_cleanly`: every rollout ended on `openenv_done` or
  `max_turns`, with no error, and every invalid reply was answered with feedback.
"""

from __future__ import annotations

import json
import re
from typing import Any


def expected_reply(body: dict[str, Any], script: list[str]) -> str:
    """The local policy's `script` reply to a request: by assistant-turn index."""
    turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
    return script[turn] if turn < len(script) else script[-1]


def assert_reply_is(message: dict[str, Any], reply: str) -> None:
    """`message` is the policy's `reply` as the next request carries it: as text, or
    as the tool call(s) the policy made of it (their names and arguments)."""
    assert message["role"] == "assistant", message
    calls = message.get("tool_calls")
    if not calls:
        assert message.get("content") == reply, (message, reply)
        return
    value = json.loads(reply)
    items = value if isinstance(value, list) else [value]
    assert [c["function"]["name"] for c in calls] == [v["tool_name"] for v in items]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        v.get("arguments", {}) for v in items
    ]


def assert_conversation_grows(bodies: list[dict[str, Any]], script: list[str]) -> None:
    """The requests of one rollout (in order) only ever grow; see the module
    docstring."""
    assert len(bodies) >= 2, f"{len(bodies)} requests: nothing to compare"
    for before, after in zip(bodies, bodies[1:], strict=False):
        sent, now = before["messages"], after["messages"]
        assert now[: len(sent)] == sent, _first_difference(sent, now)
        assert len(now) > len(sent)
        assert_reply_is(now[len(sent)], expected_reply(before, script))
        assert after.get("tools") == before.get("tools")


def _first_difference(sent: list[dict], now: list[dict]) -> str:
    for index, (a, b) in enumerate(zip(sent, now, strict=False)):
        if a != b:
            return f"message {index} rewritten:\n  was {a}\n  now {b}"
    return f"the request dropped messages: {len(sent)} then {len(now)}"


def assert_one_branch(trace: dict[str, Any]) -> None:
    """The trace's message nodes form one chain, root to leaf."""
    parents = [node.get("parent") for node in trace["nodes"]]
    assert parents == [None, *range(len(parents) - 1)], parents


def assert_episodes_ended_cleanly(traces: list[dict[str, Any]], count: int) -> None:
    """`count` rollouts, each ended on `openenv_done` or `max_turns` with no error,
    and each invalid reply answered by a user turn saying so: all of them, but for
    one last invalid reply the episode ended on (nothing answers a reply after the
    last turn)."""
    assert len(traces) == count, [t.get("errors") for t in traces]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        stop = trace["stop_condition"]
        assert stop in ("openenv_done", "max_turns"), stop
        invalid = trace["metrics"]["openenv_invalid_action_count"]
        answered = invalid_feedback_turns(trace)
        unanswered = invalid - answered
        last_is_reply = trace["nodes"][-1]["message"]["role"] == "assistant"
        assert unanswered == 0 or (unanswered == 1 and last_is_reply), (
            f"{invalid} invalid replies, {answered} answered with feedback"
        )


# The adapter's feedback opens its turn (`render_invalid`, `render_invalid_call`,
# `render_no_tool_call`, `render_invalid_end`) or, after a tool call the env answered
# with an error, closes it (`render_tool_failed`). Matching anywhere would also count
# an env's observation that quotes a model's reply which repeats the feedback (the
# local Wordle env quotes an invalid guess whole).
_FEEDBACK_OPENS = re.compile(
    r"^(Invalid action: |Invalid call: |Act by calling a tool: )"
)
_FEEDBACK_CLOSES = re.compile(
    r"\nThe tool call failed\. \d+ more invalid actions? in a row will end the "
    r"episode\.$|\nInvalid action: .*so the episode is over\.$",
    re.DOTALL,
)


def invalid_feedback_turns(trace: dict[str, Any]) -> int:
    """User (or tool) turns of the trace that answer an invalid reply: the
    adapter's feedback opens or closes them (`core/episode/action_format.py`)."""
    turns = 0
    for node in trace["nodes"]:
        message = node["message"]
        if message["role"] in ("user", "tool"):
            text = _text(message.get("content"))
            if _FEEDBACK_OPENS.match(text) or _FEEDBACK_CLOSES.search(text):
                turns += 1
    return turns


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""
