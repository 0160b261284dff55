"""`OpenEnvState`: a rollout's state, where the user simulator and the eval meet.

verifiers keeps one state per rollout and syncs it between the eval process and the
rollout's user simulator around each call. The simulator (`user.py`) leaves the
episode account there after every turn (`account.mirror`), and with native tool
calling the model's tools and its desk's address; the eval's tool server (`tools.py`)
and the task's stops, reward and metrics (`taskset.py`) read it there.

Everything that reads or writes it imports this module; the user simulator imports
the account and the desk, never the other way round.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf


class OpenEnvState(vf.State):
    reward: float = 0.0
    """Sum of the step rewards so far (with the reset's)."""
    step_rewards: list[float | None] = []
    """Each step's reward as the env gave it (None: none)."""
    reset_reward: float | None = None
    reward_mode: str = "sum"
    rewards_outside: int = 0
    """Step rewards outside the env's declared range."""
    done: bool = False
    steps: int = 0
    invalid_actions: int = 0
    invalid_streak: int = 0
    """Invalid actions in a row (native tool calling also counts them in the eval)."""
    stop_reason: str | None = None
    """`done`, `invalid_actions` or `error` once the episode is over."""
    error: str | None = None
    signals: dict[str, float] = {}
    reset_s: float | None = None
    """Wall seconds of the reset, as the simulator's client saw it."""
    step_s: list[float] = []
    """Wall seconds of each answered step, in order."""
    tools: list[dict[str, Any]] | None = None
    """Native tool calling: the model's tools (`name`, `description`,
    `input_schema`), left by the simulator after reset (None in text mode)."""
    tool_desk: str | None = None
    """Native tool calling: the address of the simulator's desk (`open_desk`: its
    socket and token), where the eval's tool server forwards the calls."""
    turn: int = 0
    """Native tool calling: model turns so far, stamped before each model call (the
    simulator tells a retried call from a new one by it)."""
    simulator_pid: int | None = None
    """The simulator process verifiers started for this rollout, left by its first
    reply: the eval holds its simulator slot until that process is gone."""
