"""Model-facing text: observations, the action format, and invalid-action feedback.

The opening turn carries the reset observation plus the action format once: one
instruction (for an action of one string field, the env's own format: reply with the
value itself; else the JSON schema; for an MCP env the call format and a bounded tool
list); later turns carry only the new observation. After an invalid action the
feedback names the problem and repeats the format (an MCP env's tools by name only),
so the model can recover.

What an observation shows (`_visible`), before formatting:

- its fields, without `metadata` and empty values (None, "", [], {});
- when nothing is left but `done` / `reward` (MCP envs such as OpenEnv's finqa_env put
  the task in the reset observation's `metadata`), the content of `metadata` instead,
  less its empty values and the reward-signal keys `frames.read_frame` scores from
  (`reward_signals`, `rewards`, `reward_components`). Otherwise `metadata` is hidden;
- for an MCP tool call (OpenEnv's `CallToolObservation`: `tool_name`, `result`,
  `error`), the tool's own result under the tool's name instead of the MCP envelope:
  the result's `data` when set, else its `structured_content` (a lone
  `{"result": x}` unwrapped to x), else the text of its `content` parts, non-text parts
  as `[image/png]` and the like; `null` when the tool returned nothing. A failed call
  (`error` set, or a result with `is_error`) shows as `error` instead:
  `<error_type>: <message>`, or the result's text. Other fields of the observation
  follow (not `done`, `reward`, `metadata`).

Observations are shown in one of two formats (`ObservationFormat`):

- `json`: what is shown, as compact JSON: `{"add":3}`, `{"error":"tool_not_found:
  Unknown tool: 'nope'"}`, `{"question":"...","company":"alphabet"}`;
- `text` (the default): one line per field, `name: value` (`add: 3`,
  `error: execution_error: ...`, `question: ...`), with the observation's one text
  field (e.g. a `prompt`) shown as plain text. A list of records (a chat-style history
  that grows every step) shows only the records the model has not been shown, leaving
  out those that merely copy the text field. A tool's result and error are always
  labelled and shown whole: a tool answering a list of records twice shows it twice.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv_v1.core.episode.schema import ActionSpec

ObservationFormat = Literal["text", "json"]

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


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _empty(value: Any) -> bool:
    return value in (None, "", [], {})


@dataclass(frozen=True)
class _View:
    """What an observation shows: `fields` in order; `whole` names the fields (a
    tool's result, its error) shown labelled and in full every turn."""

    fields: dict[str, Any]
    whole: frozenset[str] = field(default_factory=frozenset)
    from_metadata: bool = False
    """The fields are the observation's `metadata` (it had nothing else)."""


def _view(observation: dict[str, Any]) -> _View:
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
                return _View(shown, from_metadata=True)
    return _View(fields)


def shows_nothing(observation: dict[str, Any]) -> bool:
    """Whether the model would be shown nothing of the observation: no field but
    `done` / `reward`, and no `metadata` to show instead (an openenv-core 0.2.3 or
    0.3.0 server strips `metadata` from its `/ws` replies)."""
    return not _visible(observation or {})


# State fields that are bookkeeping, and names that say a field holds what the model
# must find (finqa_env's state has `ground_truth` beside `current_question`).
_STATE_BOOKKEEPING = frozenset({"episode_id", "step_count"})
_ANSWER_LIKE = re.compile(
    r"answer|truth|solution|expected|target|label|gold|secret|reward|score|correct"
    r"|hidden|private|key|token|password",
    re.I,
)


def task_from_state(state: Any) -> tuple[dict[str, Any], list[str]]:
    """What of an env's session state (its `state` message) the model may see when
    the reset observation shows nothing: its non-empty fields less bookkeeping
    (`episode_id`, `step_count`) and fields whose names sound like the answer
    (`ground_truth`, `target_word`, `secret`, ...); and the names so hidden."""
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
    return _view(observation).from_metadata


def _visible(observation: dict[str, Any]) -> dict[str, Any]:
    """The fields an observation shows (see the module docstring), in order."""
    return _view(observation).fields


def _is_tool_call(observation: dict[str, Any]) -> bool:
    """Whether the observation is OpenEnv's `CallToolObservation` (it always carries
    all three of `tool_name`, `result` and `error`)."""
    return observation.keys() >= _TOOL_KEYS and isinstance(
        observation.get("tool_name"), str
    )


def _tool_view(observation: dict[str, Any]) -> _View:
    name = observation["tool_name"] or "result"
    fields: dict[str, Any] = {}
    error = observation.get("error")
    result = observation.get("result")
    if _is_envelope(result):
        value, failed = _unwrap(result)
        if failed:
            fields["error"] = value
        elif not (error and value is None):
            fields[name] = value
    elif not (error and result is None):
        fields[name] = result
    if error:
        fields["error"] = _error_text(error)
    whole = frozenset(fields)
    for key, value in observation.items():
        if key in _TOOL_KEYS or key in _STEP_KEYS or key == "metadata":
            continue
        if key not in fields and not _empty(value):
            fields[key] = value
    return _View(fields, whole)


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
            text = _compact(structured)
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
            texts.append(part if isinstance(part, str) else _compact(part))
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
        return error if isinstance(error, str) else _compact(error)
    message = error.get("message")
    message = message if isinstance(message, str) else _compact(error)
    kind = error.get("error_type")
    return f"{kind}: {message}" if isinstance(kind, str) and kind else message


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


def render_observation(observation: dict[str, Any]) -> str:
    """What the observation shows (see the module docstring) as compact JSON."""
    return _compact(_visible(observation))


class ObservationRenderer:
    """Renders one episode's observations, remembering what the model has seen."""

    def __init__(self, format: ObservationFormat = "text") -> None:
        self.format = format
        self._seen: set[Any] = set()
        self._last_lists: dict[str, list[Any]] = {}
        self._last_texts: dict[str, str] = {}

    def __call__(self, observation: dict[str, Any]) -> str:
        if self.format == "json":
            return render_observation(observation)
        return "\n".join(text for _, text in self.pieces(observation))

    def pieces(self, observation: dict[str, Any]) -> list[tuple[str, str]]:
        """The text format's lines, one (field, text) per shown field, in order."""
        view = _view(observation)
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
            rendered = value if isinstance(value, str) else _compact(value)
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


MAX_TOOL_LIST_CHARS = 6_000
"""Most characters the tool list of an MCP env's opening turn takes; the tools past
it are named only (or counted, when even the names do not fit)."""
MAX_TOOL_DESCRIPTION_CHARS = 500
"""Most characters of one tool's description in the tool list."""
MAX_TOOL_SCHEMA_CHARS = 1_500
"""Most characters of one tool's input schema in the tool list; a longer one is
shown as its arguments' names and types."""
_CALL_FORMAT = (
    "Act by calling one tool per reply, as a JSON object: "
    '{"type":"call_tool","tool_name":<name>,"arguments":{...}}.'
)


def render_action_format(spec: ActionSpec) -> str:
    """How to act, once, in the opening turn: one instruction. For a schema whose
    only required field takes a string (`raw_field`), to reply with that value itself
    (the env's own format, e.g. Wordle's `[crane]`); else the JSON schema; for an MCP
    env the call format and the tool list, bounded by `MAX_TOOL_LIST_CHARS`. The
    action's docstring is shown as native mode's `act` description shows it, and
    the example only when it satisfies the schema."""
    example = spec.example()
    example_line = [] if example is None else [f"Example: {_compact(example)}"]
    if spec.is_mcp:
        return "\n".join([_CALL_FORMAT, "Tools:", *_tool_lines(spec), *example_line])
    if spec.raw_field:
        return _raw_format(spec)
    schema = {k: v for k, v in spec.schema.items() if k not in ("title", "description")}
    props = {
        k: v for k, v in (schema.get("properties") or {}).items() if k in spec.fields
    }
    schema["properties"] = props
    return "\n".join(
        [
            "Reply with one action: a JSON object matching this schema.",
            *_about_line(spec),
            f"Action schema: {_compact(schema)}",
            *example_line,
        ]
    )


def _about_line(spec: ActionSpec) -> list[str]:
    """The action's docstring, which often states what the schema cannot: allowed
    values, where legal moves are listed."""
    about = spec.schema.get("description")
    if isinstance(about, str) and about.strip():
        return [f"The action: {about.strip()}"]
    return []


def _raw_format(spec: ActionSpec) -> str:
    name = spec.raw_field
    assert name is not None
    description = str((spec.fields.get(name) or {}).get("description") or "").strip()
    what = f" ({description.rstrip('.')})" if description else ""
    lines = [f"Reply with the {name} itself as plain text{what}.", *_about_line(spec)]
    others = [f for f in spec.fields if f != name]
    schema = {k: v for k, v in spec.schema.items() if k not in ("title", "description")}
    schema["properties"] = dict(spec.fields)
    if others:
        lines.append(
            f"To also set {', '.join(others)}, reply with a JSON object instead: "
            f"{_compact(schema)}"
        )
    return "\n".join(lines)


def _tool_lines(spec: ActionSpec) -> list[str]:
    lines: list[str] = []
    used = 0
    tools = list(spec.tools or ())
    for index, tool in enumerate(tools):
        description = tool.description or "(no description)"
        if len(description) > MAX_TOOL_DESCRIPTION_CHARS:
            description = description[:MAX_TOOL_DESCRIPTION_CHARS] + " [...]"
        entry = [f"- {tool.name}: {description}"]
        if tool.input_schema.get("properties"):
            entry.append(_arguments_line(tool.input_schema))
        size = sum(len(line) + 1 for line in entry)
        if used + size > MAX_TOOL_LIST_CHARS:
            lines.append(_rest_of_tools(tools[index:], MAX_TOOL_LIST_CHARS - used))
            break
        lines.extend(entry)
        used += size
    return lines


def _arguments_line(schema: dict[str, Any]) -> str:
    """A tool's input schema, or past `MAX_TOOL_SCHEMA_CHARS` its arguments' names
    and types only."""
    text = _compact(schema)
    if len(text) <= MAX_TOOL_SCHEMA_CHARS:
        return f"  arguments schema: {text}"
    required = set(schema.get("required") or [])
    names = [
        f"{name} ({_type_name(spec)}{', required' if name in required else ''})"
        for name, spec in (schema.get("properties") or {}).items()
    ]
    summary = _names(names, MAX_TOOL_SCHEMA_CHARS)
    return f"  arguments: {summary} [schema of {len(text):,} chars not shown]"


def _type_name(spec: Any) -> str:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def _rest_of_tools(rest: list[Any], room: int) -> str:
    """The tools that did not fit, by name as far as `room` (at least 300) allows."""
    head = f"[{len(rest):,} more tools not shown; their names: "
    return head + _names([t.name for t in rest], max(room, 300) - len(head)) + "]"


def _names(names: list[str], room: int) -> str:
    """The names, comma-separated, as many as `room` characters take, and how many
    more there are."""
    shown, used = [], 0
    for name in names:
        if used + len(name) + 2 > room - 20:
            break
        shown.append(name)
        used += len(name) + 2
    cut = len(names) - len(shown)
    return ", ".join(shown) + (f" and {cut:,} more" if cut else "")


def render_feedback_format(spec: ActionSpec) -> str:
    """How to act, repeated after an invalid action: the opening's instruction, but
    an MCP env's tools by name only (the opening gave their schemas)."""
    if not spec.is_mcp:
        return render_action_format(spec)
    names = [t.name for t in spec.tools or ()]
    return f"{_CALL_FORMAT}\nTools: {_names(names, 2_000) if names else 'none'}."


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
        f"{render_feedback_format(spec)}"
    )


def tool_error(observation: dict[str, Any]) -> str | None:
    """What went wrong in an MCP tool call the env answered with a failure (its
    `error`, or a result with `is_error`), as the turn shows it; None otherwise."""
    if not _is_tool_call(observation):
        return None
    if observation.get("error"):
        return _error_text(observation["error"])
    result = observation.get("result")
    if _is_envelope(result):
        value, failed = _unwrap(result)
        if failed:
            return str(value)
    return None


def _more(left: int) -> str:
    plural = "s" if left != 1 else ""
    return f"{left} more invalid action{plural} in a row will end the episode."


def render_tool_hint(spec: ActionSpec) -> str:
    """The line that closes the opening turn in native tool calling, where the tools
    themselves carry the action format."""
    if spec.is_mcp:
        return "Act by calling the tools; each call is one step in the environment."
    return "Act by calling the `act` tool; each call is one step in the environment."


def render_invalid_call(problem: str, left: int) -> str:
    """A tool call that was not a valid action (native tool calling)."""
    return f"Invalid call: {problem}. The environment was not stepped. {_more(left)}"


def render_tool_failed(left: int) -> str:
    """The note after a tool call the env stepped and answered with an error."""
    return f"The tool call failed. {_more(left)}"


def render_no_tool_call(left: int) -> str:
    """The reminder after a reply without a tool call (native tool calling)."""
    return (
        "Act by calling a tool: a reply without a tool call does not step the "
        f"environment. {_more(left)}"
    )


def render_invalid_end(problem: str, streak: int) -> str:
    """The last word when `streak` invalid actions in a row end the episode."""
    return (
        f"Invalid action: {problem}. That was {streak} invalid actions in a row, "
        "so the episode is over."
    )
