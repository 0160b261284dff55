"""An episode's bounds (`EpisodeLimits`) and its running account (`EpisodeReport`),
kept whatever happens next, and how the trace shows it (`info`, `timing`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from openenv_v1.core.episode.replies import REASONING_DELIMITERS

if TYPE_CHECKING:
    from openenv_v1.core.episode.frames import Frame

StopReason = Literal["done", "invalid_actions", "error"]
RewardMode = Literal["sum", "last"]
"""How an episode's reward comes from its steps' rewards: their sum, or the last one
the env gave (OpenEnv's harness's contract)."""
ToolCalls = Literal["text", "native"]
"""How the model acts: a reply written as text, or native tool calls."""

# The defaults of the episode settings (`openenv_v1.settings.EpisodeSettings`), which
# the core's own types take too: each is written here only.
RESET_TIMEOUT_S = 60.0
STEP_TIMEOUT_S = 60.0
MAX_INVALID_ACTIONS = 3
CAPACITY_WAIT_S = 30.0
MAX_OBSERVATION_CHARS = 8_000
REWARD: RewardMode = "sum"
RESUME_LOST_SESSIONS = True


@dataclass(frozen=True)
class EpisodeLimits:
    """What bounds one episode, as `EpisodeSettings.limits` gives it."""

    reset_timeout_s: float = RESET_TIMEOUT_S
    step_timeout_s: float = STEP_TIMEOUT_S
    max_invalid_actions: int = MAX_INVALID_ACTIONS
    """Consecutive invalid actions that end the episode."""
    capacity_wait_s: float = CAPACITY_WAIT_S
    """How long reset retries (with backoff) a server at capacity."""
    episode_timeout_s: float | None = None
    """Wall seconds from the reset on after which no more steps are taken (the
    episode fails, naming the budget); None: no budget."""
    reward: RewardMode = REWARD
    reward_range: tuple[float, float] | None = None
    """The range the env declares its rewards in (openenv.yaml); a reward outside it
    is counted in `EpisodeReport.rewards_outside`."""
    reasoning_delimiters: tuple[tuple[str, str], ...] = REASONING_DELIMITERS
    """Tags of reasoning blocks, never read as the action (`core/episode/replies.py`)."""
    resume: bool = RESUME_LOST_SESSIONS
    """Resume an episode whose session is lost after its first model turn by a
    verified replay on a fresh session (`EnvEpisode`); off, the loss ends it."""


@dataclass
class EpisodeReport:
    """The running account of an episode; everything here survives a failure."""

    reward: float = 0.0
    steps: int = 0
    invalid_actions: int = 0
    invalid_streak: int = 0
    done: bool = False
    stop_reason: StopReason | None = None
    error: str | None = None
    signals: dict[str, float] = field(default_factory=dict)
    """Named reward signals the env reported on its last step (observation metadata)."""
    reset_s: float | None = None
    """Wall seconds the reset took, as the client saw it (request and server work)."""
    step_s: list[float] = field(default_factory=list)
    """Wall seconds of each answered step, in order, as the client saw them."""
    step_end: list[float] = field(default_factory=list)
    """When each answered step's answer arrived (Unix time, as verifiers stamps its
    model calls): which steps fell between two model calls."""
    step_rewards: list[float | None] = field(default_factory=list)
    """Each answered step's reward as the env gave it (None: it gave none)."""
    reward_mode: RewardMode = "sum"
    rewards_outside: int = 0
    """Step rewards outside the env's declared range (`EpisodeLimits.reward_range`)."""

    reset_reward: float | None = None
    """The reward the reset gave, if any."""
    resumes: list[dict[str, Any]] = field(default_factory=list)
    """Each resume by replay after a lost session: after how many steps, how many
    were replayed (the same number), its seconds, and the server it moved to."""
    ended_at_reset: bool = False
    """The env's reset left no episode to play (`view.reset_refusal`): it ended the
    episode there, or said it failed; the episode failed with `error` saying so."""

    @property
    def scored(self) -> bool:
        """Whether the env gave a reward at all (on a step or on the reset). An
        unscored episode's reward is None, never 0.0; but invalid actions that ran
        out are the model's failure and score what was earned (0.0 if nothing)."""
        given = [self.reset_reward, *self.step_rewards]
        return self.stop_reason == "invalid_actions" or any(
            r is not None for r in given
        )

    def final_reward(self) -> float | None:
        """The episode's reward by `reward_mode`: the sum of the step rewards, or
        the last one given; None when the env gave none."""
        if not self.scored:
            return None
        if self.reward_mode == "last":
            given = [r for r in self.step_rewards if r is not None]
            return given[-1] if given else self.reward
        return self.reward

    def add_reset(self, frame: Frame, seconds: float) -> None:
        """Account the reset's (validated) frame, which took `seconds`."""
        self.reset_s = seconds
        self.reset_reward = frame.reward
        self._add(frame)

    def add_step(
        self,
        frame: Frame,
        seconds: float,
        reward_range: tuple[float, float] | None = None,
    ) -> None:
        """Account one answered step's (validated) frame, which took `seconds`; a
        reward outside `reward_range` (the env's declared one) is counted."""
        self.step_s.append(seconds)
        self.step_end.append(time.time())
        self.steps += 1
        self.step_rewards.append(frame.reward)
        if (
            frame.reward is not None
            and reward_range
            and not reward_range[0] <= frame.reward <= reward_range[1]
        ):
            self.rewards_outside += 1
        self._add(frame)

    def _add(self, frame: Frame) -> None:
        self.reward += frame.reward or 0.0
        self.done = frame.done
        if frame.signals:
            self.signals = frame.signals
        if self.done:
            self.stop_reason = "done"

    def add_resume(self, replayed: int, seconds: float, server: str | None) -> None:
        """Account a resume that replayed `replayed` steps on `server`."""
        self.resumes.append(
            {"replayed_steps": replayed, "seconds": round(seconds, 4), "server": server}
        )

    def fail(self, message: str) -> None:
        self.done, self.stop_reason, self.error = True, "error", message

    def end_at_reset(self, message: str) -> None:
        """The reset left no episode to play: it fails with `message`."""
        self.ended_at_reset = True
        self.fail(message)

    def info(self) -> dict[str, Any]:
        """The account as the trace's `info["openenv"]` shows it (optional keys only
        when there are any)."""
        info: dict[str, Any] = {
            "reward": self.final_reward(),
            "reward_mode": self.reward_mode,
            "step_rewards": list(self.step_rewards),
            "steps": self.steps,
            "invalid_actions": self.invalid_actions,
            "stop_reason": self.stop_reason,
        }
        if self.signals:
            info["signals"] = dict(self.signals)
        if self.rewards_outside:
            info["rewards_outside_range"] = self.rewards_outside
        if self.resumes:
            info["resumes"] = [dict(r) for r in self.resumes]
        if self.ended_at_reset:
            info["ended_at_reset"] = True
        return info

    def timing(self) -> dict[str, Any]:
        """How long the env took, as the trace's `info["openenv_timing"]` shows it
        (seconds to 0.1 ms; `step_end` in Unix time)."""
        return {
            "reset_s": None if self.reset_s is None else round(self.reset_s, 4),
            "step_s": [round(t, 4) for t in self.step_s],
            "step_end": [round(t, 4) for t in self.step_end],
        }

    def count_invalid(self, limit: int) -> int:
        """Count one invalid action and return how many more in a row end the
        episode; at 0 the episode is over (`invalid_actions`, unless already done)."""
        self.invalid_actions += 1
        self.invalid_streak += 1
        left = max(0, limit - self.invalid_streak)
        if left == 0 and not self.done:
            self.done, self.stop_reason = True, "invalid_actions"
        return left
