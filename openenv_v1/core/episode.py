"""One episode against a connected client: reset, then one step per model reply.

`EnvEpisode` owns the rules that make an episode bounded and honest:

- a reply that is not a valid action (unparseable, against the live schema, or refused
  by the server with `VALIDATION_ERROR`) never reaches `step`; the model is told what is
  wrong, and `max_invalid_actions` of them in a row end the episode. An MCP tool call
  the env answers with an error is a step (its reward counts) and also counts as
  invalid;
- the same rules serve both ways the model acts: a reply written as text (`act`) and a
  native tool call (`call`, `tool_calls="native"`), whose invalid calls get a short
  note instead of the action format;
- the step reward is added to `report.reward` as it arrives, so what was earned stays
  known whatever happens next;
- after `done`, or after any failure, nothing is stepped again. A failed or timed-out
  call, or a session the server closed between calls, ends the episode rather than
  letting the client reconnect to a fresh session;
- a reset kwarg the env's `reset` does not take (OpenEnv drops it silently) is logged
  once per key, when the env's source is at hand to tell (`read_reset_params`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from openenv_v1.core.actions import (
    InvalidAction,
    call_to_action,
    parse_action,
    text_tool_call,
)
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_message,
)
from openenv_v1.core.launch import EnvTarget, http_base, open_env
from openenv_v1.core.mcp_route import route_mcp_steps
from openenv_v1.core.render import (
    REWARD_SIGNAL_KEYS,
    ObservationFormat,
    render_invalid_end,
    render_no_tool_call,
    render_tool_failed,
    tool_error,
)
from openenv_v1.core.replies import REASONING_DELIMITERS
from openenv_v1.core.schema import (
    ActionSpec,
    ResetParams,
    fetch_action_spec,
    read_reset_params,
)
from openenv_v1.core.turns import Turn, TurnRenderer

logger = logging.getLogger(__name__)

StopReason = Literal["done", "invalid_actions", "error"]
ToolCalls = Literal["text", "native"]
"""How the model acts: a reply written as text, or native tool calls."""


@dataclass(frozen=True)
class EpisodeLimits:
    reset_timeout_s: float = 60.0
    step_timeout_s: float = 60.0
    max_invalid_actions: int = 3
    """Consecutive invalid actions that end the episode."""
    capacity_wait_s: float = 30.0
    """How long reset retries (with backoff) a server at capacity."""
    reasoning_delimiters: tuple[tuple[str, str], ...] = REASONING_DELIMITERS
    """Tags of reasoning blocks, never read as the action (`core/replies.py`)."""


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

    def fail(self, message: str) -> None:
        self.done, self.stop_reason, self.error = True, "error", message

    def info(self) -> dict[str, Any]:
        """The account as the trace's `info["openenv"]` shows it: reward, steps,
        invalid actions, stop reason, and the named signals when there are any."""
        info: dict[str, Any] = {
            "reward": self.reward,
            "steps": self.steps,
            "invalid_actions": self.invalid_actions,
            "stop_reason": self.stop_reason,
        }
        if self.signals:
            info["signals"] = dict(self.signals)
        return info

    def timing(self) -> dict[str, Any]:
        """How long the env took, as the trace's `info["openenv_timing"]` shows it:
        `reset_s` and each step's `step_s`, in milliseconds' precision."""
        return {
            "reset_s": None if self.reset_s is None else round(self.reset_s, 4),
            "step_s": [round(t, 4) for t in self.step_s],
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


def _at_capacity(exc: BaseException) -> bool:
    return server_error_code(exc) == "CAPACITY_REACHED"


# Reset keys already warned about in this process.
_warned_reset_keys: set[str] = set()


class EnvEpisode:
    def __init__(
        self,
        client: Any,
        spec: ActionSpec,
        limits: EpisodeLimits,
        label: str,
        reset_params: ResetParams | None = None,
        observation_format: ObservationFormat = "text",
        message_timeout_s: float = float("inf"),
        observation_images: bool = True,
        max_observation_chars: int = 8_000,
        tool_calls: ToolCalls = "text",
    ) -> None:
        self.client = client
        self.spec = spec
        self.limits = limits
        self.label = label
        self.reset_params = reset_params
        """The env's reset signature when its source was read; None when unknown."""
        self.report = EpisodeReport()
        self.turns = TurnRenderer(
            observation_format, observation_images, max_observation_chars
        )
        self.message_timeout_s = message_timeout_s
        """The client's own per-message timeout (`EnvTarget.message_timeout_s`)."""
        self.native = tool_calls == "native"

    async def reset(self, kwargs: dict[str, Any]) -> Turn:
        """Reset and return the opening turn. A refusal is an `EnvFailure`, with a
        server at capacity retried for up to `capacity_wait_s` first."""
        self._warn_unknown_reset_keys(kwargs)
        started = time.perf_counter()
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
        self.report.reset_s = time.perf_counter() - started
        self._absorb(result)
        if self.report.done:
            self.report.stop_reason = "done"
        return self.turns.opening(result.observation, self.spec, self.native)

    def _warn_unknown_reset_keys(self, kwargs: dict[str, Any]) -> None:
        if self.reset_params is not None:
            _warn_unknown_keys(self.label, self.reset_params, [kwargs])

    async def act(self, reply: str, finish_reason: str | None = None) -> Turn:
        """Apply one model reply written as text and return the next user turn.
        `finish_reason` is the server's, where the verifiers line passes it on."""
        if self.report.done:
            return Turn("The episode is over.", failed=True)
        try:
            action = parse_action(
                reply,
                self.spec,
                finish_reason=finish_reason,
                delimiters=self.limits.reasoning_delimiters,
            )
        except InvalidAction as e:
            return self._invalid(str(e))
        return await self._apply(action)

    async def reply_without_call(
        self, reply: str, finish_reason: str | None = None
    ) -> Turn:
        """Native tool calling, a reply with no structured tool call: a tool call it
        writes as text (`actions.text_tool_call`) is stepped as that call; a reply
        that ended inside its reasoning is an invalid action; else `no_tool_call`."""
        if self.report.done:
            return Turn("The episode is over.")
        try:
            call = text_tool_call(
                reply,
                finish_reason=finish_reason,
                delimiters=self.limits.reasoning_delimiters,
            )
        except InvalidAction as e:
            return self._invalid(str(e))
        if call is None:
            return self.no_tool_call()
        return await self.call(*call)

    async def call(self, tool: str, arguments: Any) -> Turn:
        """Apply one native tool call (a tool of `spec.model_tools()` and its parsed
        arguments) and return the tool's result as a turn."""
        if self.report.done:
            return Turn("The episode is over.", failed=True)
        try:
            action = call_to_action(tool, arguments, self.spec)
        except InvalidAction as e:
            return self._invalid(str(e))
        return await self._apply(action)

    def no_tool_call(self) -> Turn:
        """Native tool calling: the reminder after a reply that called no tool,
        counted as an invalid action (the last one ends the episode)."""
        report = self.report
        if report.done:
            return Turn("The episode is over.")
        left = report.count_invalid(self.limits.max_invalid_actions)
        if left == 0:
            text = render_invalid_end("the reply called no tool", report.invalid_streak)
        else:
            text = render_no_tool_call(left)
        return self.turns.message(text)

    async def _apply(self, action: dict[str, Any]) -> Turn:
        if _session_closed(self.client):
            return self._failed(
                "the env server closed the session (it stopped, restarted or dropped "
                "the connection); not reconnecting to a fresh env mid-episode"
            )
        started = time.perf_counter()
        try:
            result = await self._step(action)
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
        report = self.report
        report.step_s.append(time.perf_counter() - started)
        report.steps += 1
        self._absorb(result)
        if report.done:
            report.stop_reason = "done"
        observation = result.observation or {}
        if tool_error(observation) is None:
            report.invalid_streak = 0
            return self.turns.observation(observation)
        left = report.count_invalid(self.limits.max_invalid_actions)
        note = (
            render_tool_failed(left)
            if left
            else render_invalid_end("the tool call failed", report.invalid_streak)
        )
        turn = self.turns.observation(observation, reserve=len(note) + 1)
        if not report.done or report.stop_reason == "invalid_actions":
            turn.text = f"{turn.text}\n{note}"
        turn.failed = True
        return turn

    async def _step(self, action: dict[str, Any]) -> Any:
        """`client.step` within `step_timeout_s`. The client bounds every message by
        its own timeout already, so a second timer is armed only when that one is
        longer (a timer per step costs more than a local env's step takes)."""
        if self.limits.step_timeout_s >= self.message_timeout_s:
            return await self.client.step(action)
        async with asyncio.timeout(self.limits.step_timeout_s):
            return await self.client.step(action)

    def _absorb(self, result: Any) -> None:
        self.report.reward += float(result.reward or 0.0)
        self.report.done = bool(result.done)
        signals = _signals(result.metadata) or _signals(
            (result.observation or {}).get("metadata")
        )
        if signals:
            self.report.signals = signals

    def _invalid(self, problem: str) -> Turn:
        report = self.report
        left = report.count_invalid(self.limits.max_invalid_actions)
        if left == 0:
            turn = self.turns.message(
                render_invalid_end(problem, report.invalid_streak)
            )
            turn.failed = True
            return turn
        if self.native:
            return self.turns.invalid_call(problem, left)
        return self.turns.invalid(problem, self.spec, left)

    def _failed(self, message: str) -> Turn:
        self.report.fail(f"{self.label}: {message} (after {self.report.steps} steps)")
        turn = self.turns.message(
            f"The environment failed: {message}. The episode is over."
        )
        turn.failed = True
        return turn


def _signals(metadata: Any) -> dict[str, float]:
    """Numeric reward signals from observation metadata: a `reward_signals` /
    `rewards` mapping if present."""
    if not isinstance(metadata, dict):
        return {}
    for key in REWARD_SIGNAL_KEYS:
        raw = metadata.get(key)
        if isinstance(raw, dict):
            return {
                str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float))
            }
    return {}


def _session_closed(client: Any) -> bool:
    """Whether the server closed the client's WebSocket since the last call. OpenEnv's
    client would reconnect on the next call, to a new session with a fresh env. (Reads
    the client's socket attribute; a client without one is assumed connected.)"""
    if not hasattr(client, "_ws"):
        return False
    ws = client._ws
    state = getattr(getattr(ws, "state", None), "name", "")
    return ws is None or state in ("CLOSING", "CLOSED")


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in kwargs.items())


async def open_episode(
    target: EnvTarget,
    limits: EpisodeLimits,
    stack: contextlib.AsyncExitStack,
    *,
    observation_format: ObservationFormat = "text",
    observation_images: bool = True,
    max_observation_chars: int = 8_000,
    tool_calls: ToolCalls = "text",
) -> EnvEpisode:
    """Launch or connect (closed by `stack`) and read the action contract; the episode
    is ready for `reset`. An env whose lock pins openenv-core 0.2.2 has its MCP steps
    sent as the session's JSON-RPC (`route_mcp_steps`)."""
    source = env_source_dir(target)
    client = route_mcp_steps(await open_env(target, stack), source, target.label)
    spec = await fetch_action_spec(
        client, http_base(client.base_url or target.label), limits.step_timeout_s
    )
    params = await asyncio.to_thread(read_reset_params, source) if source else None
    return EnvEpisode(
        client,
        spec,
        limits,
        target.label,
        params,
        observation_format,
        message_timeout_s=target.message_timeout_s,
        observation_images=observation_images,
        max_observation_chars=max_observation_chars,
        tool_calls=tool_calls,
    )


def warn_unknown_reset_kwargs(
    target: EnvTarget, resets: Sequence[Mapping[str, Any]]
) -> None:
    """Log, once per key, each reset kwarg of `resets` that the env's `reset` does not
    take (OpenEnv drops those silently). Only for a target launched from local source,
    which is what tells."""
    source = env_source_dir(target)
    params = read_reset_params(source) if source else None
    if params is not None:
        _warn_unknown_keys(target.label, params, resets)


def _warn_unknown_keys(
    label: str, params: ResetParams, resets: Sequence[Mapping[str, Any]]
) -> None:
    counts: dict[str, int] = {}
    for kwargs in resets:
        for key in params.unknown(dict(kwargs)):
            counts[key] = counts.get(key, 0) + 1
    for key, count in counts.items():
        if key in _warned_reset_keys:
            continue
        _warned_reset_keys.add(key)
        share = f" (in {count} of {len(resets)} resets)" if len(resets) > 1 else ""
        logger.warning(
            "%s: reset kwarg %r%s is not a parameter of the env's reset (%s); "
            "OpenEnv drops it without telling the env",
            label,
            key,
            share,
            params.where,
        )


def env_source_dir(target: EnvTarget) -> str | None:
    """The local source of the env's server, when this episode launches it from a local
    `project_path` (a Space cloned at launch, a Docker image or a `base_url` server
    has none here)."""
    if target.base_url or target.launcher != "uv":
        return None
    path = target.provider_kwargs.get("project_path")
    if isinstance(path, str) and not path.startswith("git+") and os.path.isdir(path):
        return path
    return None
