"""The opening messages of the package's chat harnesses, on both verifiers lines
(`message_to_wire` is at the same place on both).

    messages = opening_messages(*harness.resolve_prompt(data))
"""

from __future__ import annotations

from typing import Any

from verifiers.v1.dialects.chat import message_to_wire


def opening_messages(system_prompt: str | None, prompt: Any) -> list[dict[str, Any]]:
    """The system prompt (if any), then the prompt: a string as one user message,
    verifiers messages in their wire form."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    if isinstance(prompt, str):
        messages.append({"role": "user", "content": prompt})
    elif prompt is not None:
        messages += [message_to_wire(m) for m in prompt]
    return messages


__all__ = ["opening_messages"]
