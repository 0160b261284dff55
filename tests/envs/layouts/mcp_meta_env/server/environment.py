"""Apple sums over MCP tools. The reset observation has no fields of its own: the
task (`question`, `hint`) is only in its `metadata`, as in OpenEnv's finqa_env.

Tools (OpenEnv's generic `CallToolAction`):

- `add(a, b)` returns `{"value": a + b, "unit": "apples"}` (structured); a negative
  number is refused with a tool error;
- `rules()` returns the rules as text;
- `answer(value)` pays 1.0 and ends the episode when `value` is the sum; a wrong value
  pays 0.0 and says so, and the 3rd wrong one ends the episode.

Every other call pays 0.0.
"""

from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import Observation, State

try:  # installed as the `mcp_meta_env` package
    from ..models import task_for
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from models import task_for

MAX_WRONG_ANSWERS = 3
RULES = "Work out the sum (add helps), then call answer with it. Three wrong answers end the game."


class AppleSumEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._task = task_for(None)
        self._wrong = 0
        self._solved = False
        self._payout = 0.0
        self._state = State()

        server = FastMCP("apple_sums")

        @server.tool
        def add(a: int, b: int) -> dict:
            """Add two counts of apples."""
            if a < 0 or b < 0:
                raise ToolError(f"cannot add a negative number of apples ({a}, {b})")
            return {"value": a + b, "unit": "apples"}

        @server.tool
        def rules() -> str:
            """The rules of the game, as text."""
            return RULES

        @server.tool
        def answer(value: int) -> str:
            """Give the final answer; a right one ends the game."""
            if value == self._task.answer:
                self._solved = True
                self._payout = 1.0
                return f"{value} apples: correct"
            self._wrong += 1
            return (
                f"{value} apples: wrong ({MAX_WRONG_ANSWERS - self._wrong} tries left)"
            )

        super().__init__(server)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self._task = task_for(seed)
        self._wrong = 0
        self._solved = False
        self._state = State(episode_id=episode_id)
        hint = "Use the add tool, then answer."
        return Observation(
            done=False,
            reward=0.0,
            metadata={"question": self._task.question, "hint": hint},
        )

    async def step_async(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        self._payout = 0.0
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction):
            self._state.step_count += 1
            observation.reward = self._payout
            observation.done = self._solved or self._wrong >= MAX_WRONG_ANSWERS
        return observation

    def _step_impl(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(
            done=False, reward=0.0, metadata={"error": "only MCP tool calls are played"}
        )

    @property
    def state(self) -> State:
        return self._state
