"""Model-facing text: observations, the action format, and invalid-action feedback.

The opening turn carries the reset observation plus the action format (schema or tool
list) once; later turns carry only the new observation. After an invalid action the
feedback names the problem and repeats the format, so the model can recover.
"""

from __future__ import annotations

import json
from typing import Any

from openenv_v1.core.schema import ActionSpec


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render_observation(observation: dict[str, Any]) -> str:
    """The observation as compact JSON, without empty fields and without `metadata`
    (reward signals are for scoring, not for the model)."""
    shown = {
        k: v
        for k, v in observation.items()
        if k != "metadata" and v not in (None, "", [], {})
    }
    return _compact(shown)


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


def render_opening(observation: dict[str, Any], spec: ActionSpec) -> str:
    return f"{render_observation(observation)}\n\n{render_action_format(spec)}"


def render_invalid(problem: str, spec: ActionSpec, left: int) -> str:
    return (
        f"Invalid action: {problem}. The environment was not stepped. "
        f"{left} more invalid action{'s' if left != 1 else ''} in a row will end the episode.\n"
        f"{render_action_format(spec)}"
    )
