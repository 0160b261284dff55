"""What an observation shows the model, before it is formatted.

- its fields, less `metadata` and empty values; when only `done`/`reward` is left (an
  MCP env may put the task in the reset's `metadata`), `metadata` instead, less its
  empty values and reward-signal keys;
- for an MCP tool call (`tool_name`, `result`, `error`), the tool's own result under
  its name instead of the MCP envelope (`data`, else `structured_content`, else the
  text of its `content` parts), or its failure as `error` (`tool_error`), then the
  observation's other fields;
- a reset observation that shows nothing may be shown from the session's state
  (`task_from_state`), less bookkeeping and answer-like fields.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# The metadata keys reward signals are read from (`frames.read_frame`, in this order):
# scoring, not content.
REWARD_SIGNAL_KEYS = ("reward_signals", "rewards", "reward_components")
_STEP_KEYS = frozenset({"done", "reward"})
_TOOL_KEYS = frozenset({"tool_name", "result", "error"})
# The fields of an MCP `CallToolResult` as OpenEnv serializes it (fastmcp's snake_case
# or the MCP SDK's camelCase).
_ENVELOPE_KEYS = frozenset(
    {
        "content",
        "structured_content",
        "structuredContent",
        "data",
        "meta",
        "_meta",
        "is_error",
        "isError",
    }
)


def compact(value: Any) -> str:
    """`value` as compact JSON (no spaces, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _empty(value: Any) -> bool:
    return value in (None, "", [], {})


@dataclass(frozen=True)
class View:
    """What an observation shows: `fields` in order; `whole` names the fields (a
    tool's result, its error) shown labelled and in full every turn."""

    fields: dict[str, Any]
    whole: frozenset[str] = field(default_factory=frozenset)
    from_metadata: bool = False
    """The fields are the observation's `metadata` (it had nothing else)."""


def view_of(observation: dict[str, Any]) -> View:
    if _is_tool_call(observation):
        return _tool_view(observation)
    fields = {k: v for k, v in observation.items() if k != "metadata" and not _empty(v)}
    if fields.keys() <= _STEP_KEYS:
        metadata = observation.get("metadata")
        if isinstance(metadata, dict):
            shown = {
                str(k): v
                for k, v in metadata.items()
                if k not in REWARD_SIGNAL_KEYS and not _empty(v)
            }
            if shown:
                return View(shown, from_metadata=True)
    return View(fields)


def shows_nothing(observation: dict[str, Any]) -> bool:
    """Whether the model would be shown nothing of the observation (openenv-core
    0.2.3 and 0.3.0 servers strip `metadata` from their `/ws` replies)."""
    return not visible(observation or {})


# State fields that are bookkeeping, and names that say a field holds what the model
# must find (finqa_env's state has `ground_truth` beside `current_question`).
_STATE_BOOKKEEPING = frozenset({"episode_id", "step_count"})
_ANSWER_LIKE = re.compile(
    r"answer|truth|solution|expected|target|label|gold|secret|reward|score|correct"
    r"|hidden|private|key|token|password",
    re.I,
)


def task_from_state(state: Any) -> tuple[dict[str, Any], list[str]]:
    """What of an env's session state the model may see: its non-empty fields less
    bookkeeping and fields whose names sound like the answer; and the names hidden."""
    if not isinstance(state, dict):
        return {}, []
    shown: dict[str, Any] = {}
    hidden: list[str] = []
    for key, value in state.items():
        if key in _STATE_BOOKKEEPING or _empty(value):
            continue
        if _ANSWER_LIKE.search(str(key)):
            hidden.append(str(key))
        else:
            shown[str(key)] = value
    return shown, hidden


def metadata_shown(observation: dict[str, Any]) -> bool:
    """Whether the model is shown the observation's `metadata` (it is all there is)."""
    return view_of(observation).from_metadata


def visible(observation: dict[str, Any]) -> dict[str, Any]:
    """The fields an observation shows, in order."""
    return view_of(observation).fields


def _is_tool_call(observation: dict[str, Any]) -> bool:
    return observation.keys() >= _TOOL_KEYS and isinstance(
        observation.get("tool_name"), str
    )


def _tool_view(observation: dict[str, Any]) -> View:
    name = observation["tool_name"] or "result"
    fields: dict[str, Any] = {}
    error = observation.get("error")
    result = observation.get("result")
    if _is_envelope(result):
        value, failed = _unwrap(result)
        if not failed and not (error and value is None):
            fields[name] = value
    elif not (error and result is None):
        fields[name] = result
    failure = _tool_failure(observation)
    if failure is not None:
        fields["error"] = failure
    whole = frozenset(fields)
    for key, value in observation.items():
        if key in _TOOL_KEYS or key in _STEP_KEYS or key == "metadata":
            continue
        if key not in fields and not _empty(value):
            fields[key] = value
    return View(fields, whole)


def _is_envelope(result: Any) -> bool:
    return (
        isinstance(result, dict)
        and "content" in result
        and result.keys() <= _ENVELOPE_KEYS
    )


def _unwrap(result: dict[str, Any]) -> tuple[Any, bool]:
    """The tool's own value in an MCP result, and whether the tool reported an error."""
    parts = result.get("content")
    structured = result.get("structured_content", result.get("structuredContent"))
    if result.get("is_error") or result.get("isError"):
        text = _parts_text(parts)
        if text is None and structured is not None:
            text = compact(structured)
        return text or "the tool reported an error", True
    if result.get("data") is not None:
        return result["data"], False
    if structured is not None:
        if isinstance(structured, dict) and list(structured) == ["result"]:
            return structured["result"], False
        return structured, False
    return _parts_text(parts), False


def _parts_text(parts: Any) -> str | None:
    """MCP content parts as text: text parts as they are, others summarized
    (`[image/png]`, `[resource file:///a.txt]`), one per line."""
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        if not isinstance(part, dict):
            texts.append(part if isinstance(part, str) else compact(part))
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text") or ""))
        elif kind == "resource":
            resource = part.get("resource") or {}
            text = resource.get("text") if isinstance(resource, dict) else None
            uri = resource.get("uri") if isinstance(resource, dict) else None
            texts.append(text if isinstance(text, str) else f"[resource {uri}]")
        elif kind == "resource_link":
            texts.append(f"[resource {part.get('uri')}]")
        else:
            mime = part.get("mimeType") or part.get("mime_type")
            texts.append(f"[{mime or kind or 'content'}]")
    return "\n".join(texts) if texts else None


def _error_text(error: Any) -> str:
    """OpenEnv's `ToolError` (`error_type`, `message`) as `<error_type>: <message>`."""
    if not isinstance(error, dict):
        return error if isinstance(error, str) else compact(error)
    message = error.get("message")
    message = message if isinstance(message, str) else compact(error)
    kind = error.get("error_type")
    return f"{kind}: {message}" if isinstance(kind, str) and kind else message


def tool_error(observation: dict[str, Any]) -> str | None:
    """What went wrong in an MCP tool call the env answered with a failure (its
    `error`, or a result with `is_error`), as the turn shows it; None otherwise."""
    return _tool_failure(observation) if _is_tool_call(observation) else None


def _tool_failure(observation: dict[str, Any]) -> str | None:
    if observation.get("error"):
        return _error_text(observation["error"])
    result = observation.get("result")
    if _is_envelope(result):
        value, failed = _unwrap(result)
        if failed:
            return str(value)
    return None


def said_failure(observation: dict[str, Any]) -> str | None:
    """What a reply says of its own failure, or None: a `status` of "error" or
    "failed" (in the observation or its `metadata`), with its `error` or `message`
    text. Nothing else counts: a step's `error` field tells the model how its
    action went, not a failure of the env."""
    for part in _reply_parts(observation):
        status = part.get("status")
        if isinstance(status, str) and status.strip().lower() in ("error", "failed"):
            return _said_text(observation) or f"status {status!r}"
    return None


def reset_refusal(observation: dict[str, Any], done: bool) -> str | None:
    """Why a reset's reply leaves no episode to play, or None: `done` true, it
    says it failed (`said_failure`), or it carries an `error` (no action was taken
    yet, so an error can only be the env's own)."""
    said = said_failure(observation) or _said_text(observation, ("error",))
    if done:
        why = "the env ended the episode at its reset (`done: true` before any step)"
        return f"{why}: {said}" if said else why
    return f"the env's reset failed: {said}" if said else None


def _reply_parts(observation: dict[str, Any]) -> list[dict[str, Any]]:
    metadata = observation.get("metadata")
    return [observation, *([metadata] if isinstance(metadata, dict) else [])]


def _said_text(
    observation: dict[str, Any], keys: tuple[str, ...] = ("error", "message")
) -> str | None:
    for key in keys:
        for part in _reply_parts(observation):
            value = part.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()[:500]
            if isinstance(value, dict) and value:
                return _error_text(value)[:500]
    return None
