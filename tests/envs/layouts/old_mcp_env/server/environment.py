"""A tally kept over MCP tools, written as envs were for openenv-core 0.2.2: an
`MCPEnvironment` with its tools on a FastMCP server and no `step_async` of its own.

On 0.2.2 a `list_tools` or `call_tool` step over `/ws` deadlocks the session (the
step runs the tool through `run_async_safely` while the session's MCP client is bound
to the server's event loop); the tools answer through the session's JSON-RPC.

- `reset(seed)` starts the tally at `seed` (0 without one) and says so;
- `add(n)` adds `n` and returns `{"tally": ..., "calls": ...}`, the calls counted by
  this env instance since its reset; a negative `n` is refused with a tool error;
- `report()` returns the tally as text.

Tool calls bring no reward and never end the episode.
"""

from typing import Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.types import Observation, State


class TallyObservation(Observation):
    """The reset observation: where the tally starts."""

    message: str = ""


class TallyEnvironment(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self._tally = 0
        self._calls = 0
        self._state = State()
        server = FastMCP("tally")

        @server.tool
        def add(n: int) -> dict:
            """Add n (zero or more) to the tally."""
            if n < 0:
                raise ToolError(f"the tally only grows: cannot add {n}")
            self._tally += n
            self._calls += 1
            return {"tally": self._tally, "calls": self._calls}

        @server.tool
        def report() -> str:
            """The tally so far, as text."""
            self._calls += 1
            return f"the tally is {self._tally} after {self._calls} calls"

        super().__init__(server)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> TallyObservation:
        self._tally = seed or 0
        self._calls = 0
        self._state = State(episode_id=episode_id)
        return TallyObservation(
            done=False,
            reward=0.0,
            message=f"The tally starts at {self._tally}. Grow it with add.",
        )

    def _step_impl(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "tools only"})

    @property
    def state(self) -> State:
        return self._state
