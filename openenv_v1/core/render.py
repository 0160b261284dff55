"""Model-facing text: observations, the action format, and invalid-action feedback.

The opening turn carries the reset observation plus the action format (schema or tool
list) once; later turns carry only the new observation. After an invalid action the
feedback names the problem and repeats the format, so the model can recover.

Observations are shown in one of two formats (`ObservationFormat`):

- `json`: the observation as compact JSON;
- `text` (the default): one line per field, `name: value`, with the observation's one
  text field (e.g. a `prompt`) shown as plain text. A list of records (a chat-style
  history that grows every step) shows only the records the model has not been shown,
  leaving out those that merely copy the text field.

Both leave out `metadata` (reward signals are for scoring, not for the model) and
empty fields.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from openenv_v1.core.schema import ActionSpec

ObservationFormat = Literal["text", "json"]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _visible(observation: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in observation.items()
        if k != "metadata" and v not in (None, "", [], {})
    }


def _record_key(record: dict[str, Any]) -> Any:
    """A hashable identity for a record: its items, or its JSON when they nest."""
    try:
        key = tuple(record.items())
        hash(key)
    except TypeError:
        return _compact(record)
    return key


def _is_prose(text: str) -> bool:
    return any(c.isspace() for c in text.strip())


def render_observation(observation: dict[str, Any]) -> str:
    """The observation as compact JSON, without empty fields and `metadata`."""
    return _compact(_visible(observation))


class ObservationRenderer:
    """Renders one episode's observations, remembering what the model has seen."""

    def __init__(self, format: ObservationFormat = "text") -> None:
        self.format = format
        self._seen: set[Any] = set()
        self._last_lists: dict[str, list[Any]] = {}

    def __call__(self, observation: dict[str, Any]) -> str:
        if self.format == "json":
            return render_observation(observation)
        return "\n".join(text for _, text in self.pieces(observation))

    def pieces(self, observation: dict[str, Any]) -> list[tuple[str, str]]:
        """The text format's lines, one (field, text) per shown field, in order."""
        fields = _visible(observation)
        texts = [k for k, v in fields.items() if isinstance(v, str)]
        # The one text field, if it reads as prose, goes first and unlabelled.
        main = texts[0] if len(texts) == 1 and _is_prose(fields[texts[0]]) else None
        shown_now = {v for v in fields.values() if isinstance(v, str)}
        lines = [(main, fields[main])] if main else []
        for key, value in fields.items():
            if key == main:
                continue
            if isinstance(value, list):
                value = self._new_entries(key, value, shown_now)
                if not value:
                    continue
            rendered = value if isinstance(value, str) else _compact(value)
            lines.append((key, f"{key}: {rendered}"))
        return lines

    def _new_entries(
        self, field: str, entries: list[Any], shown_now: set[str]
    ) -> list[Any]:
        # A history usually grows by appending: the entries it had last turn were
        # judged then, so only the tail needs a look.
        last = self._last_lists.get(field, [])
        self._last_lists[field] = entries
        start = len(last) if entries[: len(last)] == last else 0
        head = [e for e in entries[:start] if not isinstance(e, dict)]
        return head + [e for e in entries[start:] if self._is_new(e, shown_now)]

    def _is_new(self, item: Any, shown_now: set[str]) -> bool:
        """Whether a list entry is worth showing. Entries that are records (chat-style
        history) are shown once per episode and not when they only copy this
        observation's text; plain values (e.g. legal moves) are always shown."""
        if not isinstance(item, dict):
            return True
        key = _record_key(item)
        if key in self._seen:
            return False
        self._seen.add(key)
        texts = (v for v in item.values() if isinstance(v, str) and len(v) > 20)
        return not any(text in shown_now for text in texts)


def render_action_format(spec: ActionSpec) -> str:
    example = _compact(spec.example())
    if spec.is_mcp:
        lines = [
            "Act by calling one tool per reply, as a JSON object: "
            '{"type":"call_tool","tool_name":<name>,"arguments":{...}}.',
            "Tools:",
        ]
        for tool in spec.tools or ():
            args = tool.input_schema.get("properties") or {}
            lines.append(f"- {tool.name}: {tool.description or '(no description)'}")
            if args:
                lines.append(f"  arguments schema: {_compact(tool.input_schema)}")
        lines.append(f"Example: {example}")
        return "\n".join(lines)
    schema = {k: v for k, v in spec.schema.items() if k not in ("title", "description")}
    props = {
        k: v for k, v in (schema.get("properties") or {}).items() if k in spec.fields
    }
    schema["properties"] = props
    lines = [
        "Reply with one action: a JSON object matching this schema.",
        f"Action schema: {_compact(schema)}",
        f"Example: {example}",
    ]
    if spec.raw_field:
        lines.append(
            f"A reply that is not JSON is taken as the value of {spec.raw_field!r}."
        )
    return "\n".join(lines)


def render_opening(
    observation: dict[str, Any],
    spec: ActionSpec,
    renderer: ObservationRenderer | None = None,
) -> str:
    shown = (renderer or ObservationRenderer())(observation)
    action_format = render_action_format(spec)
    return f"{shown}\n\n{action_format}" if shown else action_format


def render_invalid(problem: str, spec: ActionSpec, left: int) -> str:
    return (
        f"Invalid action: {problem}. The environment was not stepped. "
        f"{left} more invalid action{'s' if left != 1 else ''} in a row will end the episode.\n"
        f"{render_action_format(spec)}"
    )
