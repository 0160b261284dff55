"""An episode's observations as model text, remembering what the model has seen.

What an observation shows is `view.py`'s; the format (`ObservationFormat`) is `json`
(compact JSON) or `text` (the default: one `name: value` line per field, the one text
field as plain text). In `text`, a list of records that grows every step shows only
the records not shown before; a tool's result and error are always shown whole.
"""

from __future__ import annotations

from typing import Any, Literal

from openenv_v1.core.episode.view import compact, view_of

ObservationFormat = Literal["text", "json"]


def _record_key(record: dict[str, Any]) -> Any:
    """A hashable identity for a record: its items, or its JSON when they nest."""
    try:
        key = tuple(record.items())
        hash(key)
    except TypeError:
        return compact(record)
    return key


def _is_prose(text: str) -> bool:
    return len(text.split(maxsplit=1)) > 1


UNCHANGED = "(unchanged since the last turn)"
REPEAT_MIN_CHARS = 200
"""A text this long, the same as last turn, is not resent (`UNCHANGED`)."""


def same_texts(fields: dict[str, Any]) -> dict[str, str]:
    """Field -> the earlier field it copies, for long texts shown twice in one
    observation (BrowserGym's `text` is its `axtree_txt`): the copy is named, not
    resent, so the two do not split the turn's bound."""
    first: dict[str, str] = {}
    copies: dict[str, str] = {}
    for key, value in fields.items():
        if not isinstance(value, str) or len(value) < REPEAT_MIN_CHARS:
            continue
        if value in first:
            copies[key] = first[value]
        else:
            first[value] = key
    return copies


class ObservationRenderer:
    """Renders one episode's observations, remembering what the model has seen."""

    def __init__(self, format: ObservationFormat = "text") -> None:
        self.format = format
        self._seen: set[Any] = set()
        self._last_lists: dict[str, list[Any]] = {}
        self._last_texts: dict[str, str] = {}

    def pieces(self, observation: dict[str, Any]) -> list[tuple[str, str]]:
        """The text format's lines, one (field, text) per shown field, in order."""
        view = view_of(observation)
        fields = view.fields
        texts = [k for k, v in fields.items() if isinstance(v, str)]
        # The one text field, if it reads as prose, goes first and unlabelled (not in
        # a tool call's turn: its result and error are always labelled).
        main = (
            texts[0]
            if not view.whole and len(texts) == 1 and _is_prose(fields[texts[0]])
            else None
        )
        shown_now = {v for v in fields.values() if isinstance(v, str)}
        first_of = same_texts(fields)
        lines = [(main, fields[main])] if main else []
        if main and self._unchanged(main, fields[main]):
            lines = [(main, f"{main}: {UNCHANGED}")]
        for key, value in fields.items():
            if key == main:
                continue
            if key in first_of:
                lines.append((key, f"{key}: (same as {first_of[key]})"))
                continue
            if key not in view.whole and self._unchanged(key, value):
                lines.append((key, f"{key}: {UNCHANGED}"))
                continue
            label = key
            if isinstance(value, list) and key not in view.whole:
                grew = self._growth(key, value)
                value = self._new_entries(key, value, shown_now)
                if grew is not None:
                    value, label = grew, f"{key} (+{len(grew)} new)"
                if not value:
                    continue
            rendered = value if isinstance(value, str) else compact(value)
            lines.append((key, f"{label}: {rendered}"))
        return lines

    def _unchanged(self, field: str, value: Any) -> bool:
        """A long text the model was shown last turn, the same again (a task
        statement resent with every observation)."""
        if not isinstance(value, str) or len(value) < REPEAT_MIN_CHARS:
            return False
        last = self._last_texts.get(field)
        self._last_texts[field] = value
        return last == value

    def _growth(self, field: str, entries: list[Any]) -> list[Any] | None:
        """The entries a list of plain values (not records) gained at its end since
        last turn, when it only grew; None otherwise (shown whole)."""
        last = self._last_lists.get(field)
        if (
            not last
            or len(entries) <= len(last)
            or any(isinstance(e, dict) for e in entries)
            or entries[: len(last)] != last
        ):
            return None
        return entries[len(last) :]

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
