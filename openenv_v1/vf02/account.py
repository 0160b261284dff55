"""The episode account on the rollout state: `EpisodeReport` (the core's) is the
state's `account` field, which verifiers syncs between the eval and the simulator.

The user simulator keeps the account and copies it onto the state after every turn
(`mirror`), where the task's stops, reward and metrics read it. With native tool
calling the eval process also counts the tool calls the harness answered itself (see
`OpenEnvTask`) on the state's account, and the simulator takes those into its own
before it adds to it (`absorb_invalid`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from openenv_v1.core import EpisodeReport

if TYPE_CHECKING:
    from openenv_v1.vf02.state import OpenEnvState


def mirror(report: EpisodeReport, state: OpenEnvState) -> None:
    """Copy the episode account onto the rollout state (a copy: the episode's own
    goes on changing)."""
    state.account = copy.deepcopy(report)


def absorb_invalid(report: EpisodeReport, state: OpenEnvState) -> None:
    """Take the invalid actions another process counted on the state into `report`
    (and the end they caused, if any)."""
    counted = state.account
    report.invalid_actions = max(report.invalid_actions, counted.invalid_actions)
    report.invalid_streak = counted.invalid_streak
    if counted.done and not report.done:
        report.done, report.stop_reason = True, counted.stop_reason
