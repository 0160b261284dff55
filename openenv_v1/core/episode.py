"""One episode against a connected client: reset, then one step per model reply.

`EnvEpisode` owns the rules that make an episode bounded and honest:

- a reply that is not a valid action (unparseable, against the live schema, or refused
  by the server with `VALIDATION_ERROR`) never reaches `step`; the model is told what is
  wrong, and `max_invalid_actions` of them in a row end the episode;
- the step reward is added to `report.reward` as it arrives, so what was earned stays
  known whatever happens next;
- after `done`, or after any failure, nothing is stepped again. A failed or timed-out
  call ends the episode rather than letting the client reconnect to a fresh session.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any, Literal

from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from openenv_v1.core.actions import InvalidAction, parse_action
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_message,
)
from openenv_v1.core.launch import EnvTarget, http_base, open_env
from openenv_v1.core.render import render_invalid, render_observation, render_opening
from openenv_v1.core.schema import ActionSpec, fetch_action_spec

StopReason = Literal["done", "invalid_actions", "error"]


@dataclass(frozen=True)
class EpisodeLimits:
    reset_timeout_s: float = 60.0
    step_timeout_s: float = 60.0
    max_invalid_actions: int = 3
    """Consecutive invalid actions that end the episode."""
    capacity_wait_s: float = 30.0
    """How long reset retries (with backoff) a server at capacity."""


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

    def fail(self, message: str) -> None:
        self.done, self.stop_reason, self.error = True, "error", message


def _at_capacity(exc: BaseException) -> bool:
    return server_error_code(exc) == "CAPACITY_REACHED"


class EnvEpisode:
    def __init__(
        self, client: Any, spec: ActionSpec, limits: EpisodeLimits, label: str
    ) -> None:
        self.client = client
        self.spec = spec
        self.limits = limits
        self.label = label
        self.report = EpisodeReport()

    async def reset(self, kwargs: dict[str, Any]) -> str:
        """Reset and return the opening turn. A refusal is an `EnvFailure`, with a
        server at capacity retried for up to `capacity_wait_s` first."""
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(_at_capacity),
                stop=stop_after_delay(self.limits.capacity_wait_s),
                wait=wait_exponential_jitter(multiplier=0.5, max=5.0),
                reraise=True,
            ):
                with attempt:
                    result = await asyncio.wait_for(
                        self.client.reset(**kwargs), self.limits.reset_timeout_s
                    )
        except TimeoutError as e:
            raise EnvFailure(
                f"{self.label}: reset did not answer within {self.limits.reset_timeout_s:.0f}s"
            ) from e
        except Exception as e:
            code = server_error_code(e)
            if code == "CAPACITY_REACHED":
                raise EnvFailure(
                    f"{self.label}: server stayed at capacity for "
                    f"{self.limits.capacity_wait_s:.0f}s: {server_error_message(e)} "
                    "(raise the server's session limit or lower concurrency)"
                ) from e
            if code is not None:
                raise EnvFailure(
                    f"{self.label}: reset({_kwargs_text(kwargs)}) was rejected ({code}): "
                    f"{server_error_message(e)}"
                ) from e
            raise EnvFailure(f"{self.label}: reset failed: {describe(e)}") from e
        self._absorb(result)
        if self.report.done:
            self.report.stop_reason = "done"
        return render_opening(result.observation, self.spec)

    async def act(self, reply: str) -> str:
        """Apply one model reply and return the next user turn."""
        if self.report.done:
            return "The episode is over."
        try:
            action = parse_action(reply, self.spec)
        except InvalidAction as e:
            return self._invalid(str(e))
        try:
            result = await asyncio.wait_for(
                self.client.step(action), self.limits.step_timeout_s
            )
        except TimeoutError:
            return self._failed(
                f"step did not answer within {self.limits.step_timeout_s:.0f}s"
            )
        except Exception as e:
            code = server_error_code(e)
            if code == "VALIDATION_ERROR":
                return self._invalid(
                    f"the server rejected it: {server_error_message(e)}"
                )
            if code is not None:
                return self._failed(
                    f"step failed on the server ({code}): {server_error_message(e)}"
                )
            return self._failed(f"step failed: {describe(e)}")
        self.report.steps += 1
        self.report.invalid_streak = 0
        self._absorb(result)
        if self.report.done:
            self.report.stop_reason = "done"
        return render_observation(result.observation)

    def _absorb(self, result: Any) -> None:
        self.report.reward += float(result.reward or 0.0)
        self.report.done = bool(result.done)
        signals = _signals(result.metadata) or _signals(
            (result.observation or {}).get("metadata")
        )
        if signals:
            self.report.signals = signals

    def _invalid(self, problem: str) -> str:
        report = self.report
        report.invalid_actions += 1
        report.invalid_streak += 1
        left = self.limits.max_invalid_actions - report.invalid_streak
        if left <= 0:
            report.done, report.stop_reason = True, "invalid_actions"
            return (
                f"Invalid action: {problem}. That was {report.invalid_streak} invalid "
                "actions in a row, so the episode is over."
            )
        return render_invalid(problem, self.spec, left)

    def _failed(self, message: str) -> str:
        self.report.fail(f"{self.label}: {message} (after {self.report.steps} steps)")
        return f"The environment failed: {message}. The episode is over."


def _signals(metadata: Any) -> dict[str, float]:
    """Numeric reward signals from observation metadata: a `reward_signals` /
    `rewards` mapping if present."""
    if not isinstance(metadata, dict):
        return {}
    for key in ("reward_signals", "rewards", "reward_components"):
        raw = metadata.get(key)
        if isinstance(raw, dict):
            return {
                str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float))
            }
    return {}


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


async def open_episode(
    target: EnvTarget, limits: EpisodeLimits, stack: contextlib.AsyncExitStack
) -> EnvEpisode:
    """Launch or connect (closed by `stack`) and read the action contract; the episode
    is ready for `reset`."""
    client = await open_env(target, stack)
    spec = await fetch_action_spec(client, http_base(client.base_url or target.label))
    return EnvEpisode(client, spec, limits, target.label)
