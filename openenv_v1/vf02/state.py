"""`OpenEnvState`: a rollout's state, where the user simulator and the eval meet.

verifiers keeps one state per rollout and syncs it between the eval process and the
rollout's user simulator around each call. The simulator (`user.py`) leaves the
episode account there after every turn (one field, `account`: `account.mirror`), and with native tool
calling the model's tools and its desk's address; the eval's tool server (`tools.py`)
and the task's stops, reward and metrics (`taskset.py`) read it there.

Everything that reads or writes it imports this module; the user simulator imports
the account and the desk, never the other way round.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from openenv_v1.core.episode.report import EpisodeReport


class OpenEnvState(vf.State):
    account: EpisodeReport = Field(default_factory=EpisodeReport)
    """The episode account (`openenv_v1.core.EpisodeReport`: reward, steps, invalid
    actions, stop reason, error, signals, timings), as the simulator last left it."""
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
