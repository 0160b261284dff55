"""Native tool calling on verifiers 0.4: the episode's tools, lent to the chat harness.

On verifiers 0.4 the env (`OpenEnvEnv`) and the chat harness (`OpenEnvChatHarness`)
run in one process, so a tool call needs no tool server and no forwarding. While a
native episode is played, the env lends it under the rollout's trace id; the harness
borrows it there, passes its tools with each model call, and runs each tool call the
model makes as one step of the episode (exactly once: nothing crosses a process), until
a reply calls no tool or the episode is over.

    with lend(trace.id, episode):                  # OpenEnvEnv, around the play
        ...
    tools = borrowed(trace.id)                     # OpenEnvChatHarness.launch
    messages.append(await tools.run(call.id, name, arguments))  # one step, one answer

The tools are the core's (`ActionSpec.model_tools`): an MCP env's own tools, or one
`act` tool taking the action. A tool result is the step's turn (`Turn.chat_content`):
its text, and its images as `image_url` parts (as verifiers' own harnesses return MCP
images).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from openenv_v1.core import EnvEpisode

_lent: dict[str, EpisodeTools] = {}
"""The native episodes being played in this process, by trace id."""


class EpisodeTools:
    """One episode's tools as the model sees them, and the steps they make."""

    def __init__(self, episode: EnvEpisode) -> None:
        self.episode = episode
        self.specs: list[dict[str, Any]] = [
            {
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.input_schema,
                },
            }
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
