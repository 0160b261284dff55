"""Native tool calling on verifiers 0.4: the episode's tools, lent to the chat harness.

The env (`OpenEnvEnv`) and the chat harness run in one process, so a tool call needs
no tool server: the env lends the episode under the rollout's trace id while it is
played, and the harness runs each tool call as one step of it (exactly once).

    with lend(trace.id, episode):                  # OpenEnvEnv, around the play
        tools = borrowed(trace.id)                 # OpenEnvChatHarness.launch

The tools are the core's (`ActionSpec.model_tools`); a tool result is the step's turn
(`Turn.chat_content`), its images as `image_url` parts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from openenv_v1.chat_calls import function_tool
from openenv_v1.core import EnvEpisode

_lent: dict[str, EpisodeTools] = {}
"""The native episodes being played in this process, by trace id."""


class EpisodeTools:
    """One episode's tools as the model sees them, and the steps they make."""

    def __init__(self, episode: EnvEpisode) -> None:
        self.episode = episode
        self.specs: list[dict[str, Any]] = [
            function_tool(tool.name, tool.description, tool.input_schema)
            for tool in episode.spec.model_tools()
        ]
        """The `tools` of a chat completion request."""

    @property
    def over(self) -> bool:
        """The episode ended (done, or out of invalid actions): no more calls."""
        return self.episode.report.done

    async def run(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        """Step the episode with one tool call (its arguments as the JSON text the
        model wrote) and return the tool message that answers it. A call that is
        not a valid action is answered with why, and counted as invalid."""
        turn = await self.episode.call(name, arguments)
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "name": name,
            "content": turn.chat_content(),
        }


@contextlib.contextmanager
def lend(trace_id: str, episode: EnvEpisode) -> Iterator[EpisodeTools]:
    """Lend `episode`'s tools to the harness of rollout `trace_id` while the block
    runs."""
    tools = EpisodeTools(episode)
    _lent[trace_id] = tools
    try:
        yield tools
    finally:
        _lent.pop(trace_id, None)


def borrowed(trace_id: str) -> EpisodeTools | None:
    """The tools lent to rollout `trace_id`; None when it is not a native episode."""
    return _lent.get(trace_id)
