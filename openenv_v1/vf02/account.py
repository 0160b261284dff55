"""The episode account on the rollout state: `EpisodeReport` (the core's) copied onto
`OpenEnvState` and back.

The user simulator keeps the account and copies it onto the state after every turn,
where the task's stops, reward and metrics read it. With native tool calling the eval
process also counts the tool calls the harness answered itself (see
`OpenEnvTask`), so each side reads the state's account before adding to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_v1.core import EpisodeReport

if TYPE_CHECKING:
    from openenv_v1.vf02.state import OpenEnvState


def mirror(report: EpisodeReport, state: OpenEnvState) -> None:
    """Copy the episode account onto the rollout state."""
    state.reward = report.reward
    state.done = report.done
    state.steps = report.steps
    state.invalid_actions = report.invalid_actions
    state.invalid_streak = report.invalid_streak
    state.stop_reason = report.stop_reason
    state.error = report.error
    state.signals = dict(report.signals)
    state.reset_s = report.reset_s
    state.step_s = list(report.step_s)
    state.step_rewards = list(report.step_rewards)
    state.reset_reward = report.reset_reward
    state.reward_mode = report.reward_mode
    state.rewards_outside = report.rewards_outside


def account(state: OpenEnvState) -> EpisodeReport:
    """The episode account as the rollout state holds it."""
    return EpisodeReport(
        reward=state.reward,
        steps=state.steps,
        invalid_actions=state.invalid_actions,
        invalid_streak=state.invalid_streak,
        done=state.done,
        stop_reason=state.stop_reason,  # type: ignore[arg-type]
        error=state.error,
        signals=dict(state.signals),
        reset_s=state.reset_s,
        step_s=list(state.step_s),
        step_rewards=list(state.step_rewards),
        reset_reward=state.reset_reward,
        reward_mode=state.reward_mode,  # type: ignore[arg-type]
        rewards_outside=state.rewards_outside,
    )


def absorb_invalid(report: EpisodeReport, state: OpenEnvState) -> None:
    """Take the invalid actions another process counted on the state into `report`
    (and the end they caused, if any)."""
    report.invalid_actions = max(report.invalid_actions, state.invalid_actions)
    report.invalid_streak = state.invalid_streak
    if state.done and not report.done:
        report.done, report.stop_reason = True, state.stop_reason  # type: ignore[assignment]
