"""How to act, as the model is told: the action format, and feedback after a miss.

The opening turn carries the format once (for one string field, the value itself;
else the JSON schema; for an MCP env the call format and a bounded tool list). After
an invalid action the feedback names the problem and repeats the format; in native
tool calling the tools carry the format and the feedback is a short note.
"""

from __future__ import annotations

from typing import Any

from openenv_v1.core.episode.schema import ActionSpec
from openenv_v1.core.episode.view import compact

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
    """How to act, once, in the opening turn: for a `raw_field` schema, to reply with
    the value itself (the env's own format, e.g. Wordle's `[crane]`); else the JSON
    schema; for an MCP env the call format and the tool list. The example is shown
    only when it satisfies the schema."""
    example = spec.example()
    example_line = [] if example is None else [f"Example: {compact(example)}"]
    if spec.is_mcp:
        return "\n".join([_CALL_FORMAT, "Tools:", *_tool_lines(spec), *example_line])
    if spec.raw_field:
        return _raw_format(spec)
    return "\n".join(
        [
            "Reply with one action: a JSON object matching this schema.",
            *_about_line(spec),
            f"Action schema: {_shown_schema(spec)}",
            *example_line,
        ]
    )


def _shown_schema(spec: ActionSpec) -> str:
    """The action's schema as the model is shown it: no title or docstring (shown
    apart), no hidden fields."""
    schema = {k: v for k, v in spec.schema.items() if k not in ("title", "description")}
    return compact({**schema, "properties": dict(spec.fields)})


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
    if others:
        lines.append(
            f"To also set {', '.join(others)}, reply with a JSON object instead: "
            f"{_shown_schema(spec)}"
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
    text = compact(schema)
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


def render_invalid(problem: str, spec: ActionSpec, left: int) -> str:
    return (
        f"Invalid action: {problem}. The environment was not stepped. {_more(left)}\n"
        f"{render_feedback_format(spec)}"
    )


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
