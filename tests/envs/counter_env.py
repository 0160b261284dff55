"""A small MCP environment for tests: a counter driven by tools.

Tools: `add(n)` adds n to the counter and pays 0.25 (n over 100 is a tool error); `peek()` returns the counter and
pays nothing; `submit(answer)` pays 1.0 when the answer equals the counter (else 0.0)
and ends the episode. `app` uses OpenEnv's generic `CallToolAction`; `subclassed_app`
uses a subclass of it, which the `list_tools` step does not understand (tools must then
be listed over JSON-RPC on `/mcp`).
"""

import asyncio
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
)
from openenv.core.env_server.types import Observation, State
from pydantic import Field


class CounterEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("counter")
        self.counter = 0
        self.pending_reward = 0.0
        self.finished = False

        @mcp.tool
        def add(n: int) -> int:
            """Add n to the counter and return the new value."""
            if n > 100:
                raise ValueError(f"n={n} is over 100")
            self.counter += n
            self.pending_reward = 0.25
            return self.counter

        @mcp.tool
        def peek() -> int:
            """Return the counter without changing it."""
            self.pending_reward = 0.0
            return self.counter

        @mcp.tool
        def submit(answer: int) -> str:
            """Submit the final counter value; ends the episode."""
            self.pending_reward = 1.0 if answer == self.counter else 0.0
            self.finished = True
            return "correct" if answer == self.counter else "wrong"

        super().__init__(mcp)
        self._state = State()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        start: int = 0,
        **kwargs: Any,
    ) -> Observation:
        self.counter = start
        self.finished = False
        self._state = State(episode_id=episode_id)
        return Observation(
            done=False, reward=0.0, metadata={"note": f"counter starts at {start}"}
        )

    async def step_async(self, action, timeout_s=None, **kwargs):
        self.pending_reward = 0.0
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            observation.reward = self.pending_reward
            observation.done = self.finished
        return observation

    def _step_impl(self, action, timeout_s=None, **kwargs) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "unknown action"})

    @property
    def state(self) -> State:
        return self._state


class HangingListToolsEnvironment(CounterEnvironment):
    """Takes a `list_tools` step and never answers it, as servers on openenv-core
    0.2.2 do with MCP steps over WebSocket."""

    async def step_async(self, action, timeout_s=None, **kwargs):
        if isinstance(action, ListToolsAction):
            await asyncio.sleep(3600)
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)


class CounterCallAction(CallToolAction):
    """A subclassed call-tool action, like finqa's."""

    note: str = Field(default="", description="Ignored.")


app = create_app(
    CounterEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="counter",
    max_concurrent_envs=8,
)
subclassed_app = create_app(
    CounterEnvironment,
    CounterCallAction,
    CallToolObservation,
    env_name="counter",
    max_concurrent_envs=8,
)
hanging_app = create_app(
    HangingListToolsEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="counter",
    max_concurrent_envs=8,
)
