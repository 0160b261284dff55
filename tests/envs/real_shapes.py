"""Small envs with the shapes OpenEnv's real envs showed (issue 28), for tests.

Each app imports only what openenv 0.10 and openenv-core 0.3.0 share, so it is
served from either line's interpreter.

- `vector_app` (dm_control-like): `values`, exactly two floats (`minItems` and
  `maxItems` 2), `mode` one of "push"/"pull", `gain` in [0.5, 2]. Its docstring
  states what the schema cannot (`mode` "pull" needs `gain` 2; the server's
  validation refuses anything else, VALIDATION_ERROR with its `errors`). Each step
  pays 1.0; two steps.
- `board_app` (OpenSpiel-like): tic-tac-toe cells 0-8 taken by `cell`; the
  observation lists `legal_actions` unless reset with `hide_legal=True`. Taking a
  taken cell raises (EXECUTION_ERROR); so does every step after `reset(broken=True)`,
  with the message of a bug in the env's own code. A first move pays 0.5.
- `late_tools_app` (agent_world_model-like, MCP): no tools until reset adds
  `list_notes`; calling `unlock` adds `read_secret`, and that step's observation
  lists the tools (`tools`).
- `metadata_task_app` (finqa-like, MCP): the reset observation carries the task only
  in `metadata`; the session state holds the question and its `ground_truth`.
- `fragile_app` (BrowserGym-like): takes sessions, but one process holds one browser:
  a second concurrent reset fails ("cannot switch to a different thread").
- `terminal_app` (tbench2/BrowserGym-like): `instruction` (long, the same every
  turn), `output` (long, its error at the tail), `text` a copy of `axtree_txt`, and
  `rewards_so_far` that grows by one each step. Three steps.
"""

from __future__ import annotations

import threading
from typing import Any, Literal

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

TASK_QUESTION = "What was Alphabet's 2023 revenue growth?"
TASK_ANSWER = "8.7%"
AXTREE = "\n".join(f"[{i}] StaticText 'row {i} of the table'" for i in range(300))
AXTREE += "\n[999] button 'Submit'"
OUTPUT_TAIL = "FAILED tests/test_app.py::test_login - AssertionError: 1 != 2"
INSTRUCTION = "Fix the failing login test in /app. " + "Read the code first. " * 40


class _Base(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    @property
    def state(self) -> State:
        return self._state


class VectorAction(Action):
    """Push the cart with two forces. Use mode "pull" only with gain 2.0; example
    values: [0.5, -0.5]."""

    values: list[float] = Field(min_length=2, max_length=2)
    mode: Literal["push", "pull"]
    gain: float = Field(ge=0.5, le=2.0)

    @model_validator(mode="after")
    def _pull_needs_full_gain(self) -> VectorAction:
        # Not in the JSON schema: the server's own validation refuses it.
        if self.mode == "pull" and self.gain != 2.0:
            # A custom error: a ValueError's context is not JSON, and openenv
            # 0.10's server then fails to send the VALIDATION_ERROR at all.
            raise PydanticCustomError("pull_gain", "mode 'pull' needs gain 2.0")
        return self


class VectorObservation(Observation):
    position: list[float] = Field(default_factory=list)


class VectorEnv(_Base):
    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> VectorObservation:
        self._state = State(episode_id=episode_id)
        return VectorObservation(position=[0.0, 0.0])

    def step(self, action: Action, timeout_s=None, **kwargs: Any) -> Observation:
        assert isinstance(action, VectorAction)
        self._state.step_count += 1
        return VectorObservation(
            position=list(action.values), reward=1.0, done=self._state.step_count >= 2
        )


class BoardAction(Action):
    """Take one empty cell, 0-8, from legal_actions."""

    cell: int


class BoardObservation(Observation):
    board: str = ""
    legal_actions: list[int] = Field(default_factory=list)


class BoardEnv(_Base):
    def reset(
        self,
        seed=None,
        episode_id=None,
        hide_legal: bool = False,
        broken: bool = False,
        **kwargs: Any,
    ) -> BoardObservation:
        self._state = State(episode_id=episode_id)
        self.cells = ["."] * 9
        self.cells[4] = "O"  # the opponent opened in the centre
        self.hide_legal, self.broken = hide_legal, broken
        return self._observe()

    def _observe(self, reward: float = 0.0) -> BoardObservation:
        legal = (
            [] if self.hide_legal else [i for i, c in enumerate(self.cells) if c == "."]
        )
        return BoardObservation(
            board="".join(self.cells), legal_actions=legal, reward=reward
        )

    def step(self, action: Action, timeout_s=None, **kwargs: Any) -> Observation:
        assert isinstance(action, BoardAction)
        if self.broken:
            raise AttributeError("'StepResult' object has no attribute 'model_dump'")
        if not 0 <= action.cell < 9 or self.cells[action.cell] != ".":
            raise ValueError(f"Action {action.cell} is not legal: the cell is taken")
        first = self._state.step_count == 0
        self._state.step_count += 1
        self.cells[action.cell] = "X"
        return self._observe(0.5 if first else 0.0)


class ToolsObservation(CallToolObservation):
    tools: list[dict[str, Any]] = Field(default_factory=list)


class LateToolsEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        self.mcp = FastMCP("late")
        super().__init__(self.mcp)
        self._state = State()
        self.added: list[dict[str, Any]] = []

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id)

        def list_notes() -> list[str]:
            """List the scenario's notes."""
            return ["groceries", "taxes"]

        def unlock() -> str:
            """Unlock the secret tool."""

            def read_secret() -> str:
                """Read the secret note."""
                return "the secret is 42"

            self._add(read_secret)
            return "unlocked"

        self._add(list_notes)
        self._add(unlock)
        return Observation(done=False, reward=0.0)

    def _add(self, tool: Any) -> None:
        self.mcp.tool(tool)
        self.added.append(
            {
                "name": tool.__name__,
                "description": tool.__doc__,
                "input_schema": {"type": "object", "properties": {}},
            }
        )

    async def step_async(self, action, timeout_s=None, **kwargs):
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if isinstance(action, CallToolAction) and action.tool_name == "unlock":
            return ToolsObservation(
                **observation.model_dump(exclude={"tools"}), tools=list(self.added)
            )
        if isinstance(action, CallToolAction) and action.tool_name == "read_secret":
            observation.reward, observation.done = 1.0, True
        return observation

    def _step_impl(self, action, timeout_s=None, **kwargs) -> Observation:
        return Observation(done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


class TaskState(State):
    current_question: str = ""
    current_company: str = ""
    ground_truth: str = ""


class MetadataTaskEnv(MCPEnvironment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("finqa-like")

        @mcp.tool
        def submit_answer(answer: str) -> str:
            """Submit the final answer."""
            self.submitted = answer
            return "submitted"

        super().__init__(mcp)
        self._state = TaskState()
        self.submitted: str | None = None

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        self._state = TaskState(
            episode_id=episode_id,
            current_question=TASK_QUESTION,
            current_company="alphabet",
            ground_truth=TASK_ANSWER,
        )
        return Observation(
            done=False,
            reward=0.0,
            metadata={"question": TASK_QUESTION, "company": "alphabet"},
        )

    async def step_async(self, action, timeout_s=None, **kwargs):
        observation = await super().step_async(action, timeout_s=timeout_s, **kwargs)
        if self.submitted is not None:
            observation.done = True
            observation.reward = 1.0 if self.submitted == TASK_ANSWER else 0.0
        return observation

    def _step_impl(self, action, timeout_s=None, **kwargs) -> Observation:
        return Observation(done=False, reward=0.0)

    @property
    def state(self) -> TaskState:
        return self._state


class TextAction(Action):
    command: str


class TextObservation(Observation):
    text: str = ""


# One "browser" per process, bound to the thread that first used it.
_browser_thread: list[int] = []
_browser_lock = threading.Lock()


class FragileEnv(_Base):
    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> TextObservation:
        with _browser_lock:
            if _browser_thread and _browser_thread[0] != id(self):
                raise RuntimeError("cannot switch to a different thread")
            _browser_thread[:] = [id(self)]
        return TextObservation(text="a page")

    def step(self, action: Action, timeout_s=None, **kwargs: Any) -> Observation:
        return TextObservation(text="clicked", reward=1.0, done=True)

    def close(self) -> None:
        with _browser_lock:
            if _browser_thread == [id(self)]:
                _browser_thread.clear()


class TerminalObservation(Observation):
    instruction: str = ""
    output: str = ""
    text: str = ""
    axtree_txt: str = ""
    rewards_so_far: list[float] = Field(default_factory=list)


class TerminalEnv(_Base):
    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id)
        self.rewards: list[float] = []
        return self._observe()

    def _observe(self, reward: float = 0.0) -> TerminalObservation:
        step = self._state.step_count
        output = f"$ pytest (run {step})\n" + "collected line\n" * 1500 + OUTPUT_TAIL
        return TerminalObservation(
            instruction=INSTRUCTION,
            output=output,
            text=AXTREE,
            axtree_txt=AXTREE,
            rewards_so_far=list(self.rewards),
            reward=reward,
            done=step >= 3,
        )

    def step(self, action: Action, timeout_s=None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        self.rewards.append(0.1 * self._state.step_count)
        return self._observe(0.1)


def _app(env: Any, action: Any, observation: Any, sessions: int = 8) -> Any:
    return create_app(
        env, action, observation, env_name=env.__name__, max_concurrent_envs=sessions
    )


vector_app = _app(VectorEnv, VectorAction, VectorObservation)
board_app = _app(BoardEnv, BoardAction, BoardObservation)
late_tools_app = _app(LateToolsEnv, CallToolAction, ToolsObservation)
metadata_task_app = _app(MetadataTaskEnv, CallToolAction, CallToolObservation)
fragile_app = _app(FragileEnv, TextAction, TextObservation, sessions=4)
terminal_app = _app(TerminalEnv, TextAction, TerminalObservation)
