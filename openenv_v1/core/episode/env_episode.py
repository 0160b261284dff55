"""One episode against a connected client: reset, then one step per model reply.

`EnvEpisode`'s rules, which keep an episode bounded and honest:

- a reply that is not a valid action (unparseable, against the live schema, or refused
  by the server with `VALIDATION_ERROR`) never reaches `step`: the model is told what
  is wrong, and `max_invalid_actions` in a row end the episode. An MCP tool call the
  env answers with an error is a step (its reward counts) and counts as invalid too;
- a reply written as text (`act`) and a native tool call (`call`) follow the same
  rules; an invalid native call gets a short note instead of the action format;
- every frame is validated as it arrives (`frames`); a malformed one, or any error
  nothing here foresaw, ends the episode with the fault named (never a raw exception);
- each step's reward is added to `report` as it arrives, so what was earned stays known;
- a reset that leaves no episode to play (`view.reset_refusal`) fails the episode,
  counted as `ended_at_reset`, and so does a step whose failed reply names a variable
  the launch lacks (`explain`): no model can fix that;
- after `done`, or any failure, nothing is stepped again, and a step is never sent
  twice to a live session; a session lost after the first model turn is resumed by a
  verified replay (`resume.Resumer`);
- a reset kwarg the env's `reset` does not take (OpenEnv drops it) is logged once per
  key when the env's source tells (`env_source.read_reset_params`).

`open_episode` is the episode wing's one call into `core.launch` (an `EnvSession`):
a shared server lost before the first model turn costs no episode.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from openenv_v1.core.episode.action_format import (
    render_action_format,
    render_invalid_end,
    render_no_tool_call,
    render_tool_failed,
)
from openenv_v1.core.episode.actions import (
    InvalidAction,
    call_to_action,
    parse_action,
    text_tool_call,
)
from openenv_v1.core.episode.env_source import (
    ResetParams,
    env_source_dir,
    read_reset_params,
    recent_reset_params,
)
from openenv_v1.core.episode.frames import Frame, guard_frames, read_frame
from openenv_v1.core.episode.mcp_route import route_mcp_steps
from openenv_v1.core.episode.render import ObservationFormat
from openenv_v1.core.episode.replay import ReplayLog
from openenv_v1.core.episode.report import (
    MAX_OBSERVATION_CHARS,
    EpisodeLimits,
    EpisodeReport,
    ToolCalls,
)
from openenv_v1.core.episode.reset import OpeningTask, opening_task, reset_frame
from openenv_v1.core.episode.resume import Resumer
from openenv_v1.core.episode.schema import (
    ActionSpec,
    fetch_action_spec,
    relist_tools,
    tools_in,
)
from openenv_v1.core.episode.step_errors import illegal_action, step_refusal
from openenv_v1.core.episode.turns import Turn, TurnRenderer
from openenv_v1.core.episode.view import reset_refusal, said_failure, tool_error
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    redact,
    server_error_code,
)
from openenv_v1.core.http_client import http_base
from openenv_v1.core.launch.target import EnvSession
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.target import EnvTarget

logger = logging.getLogger(__name__)

# Reset keys already warned about in this process.
_warned_reset_keys: set[str] = set()


class EnvEpisode:
    secrets: tuple[str, ...] = ()
    """Values (`forward_env`) redacted from the episode's failure texts, which can
    quote the server; `open_episode` sets them from `EnvTarget.secret_env`."""

    def __init__(
        self,
        client: Any,
        spec: ActionSpec,
        limits: EpisodeLimits,
        label: str,
        reset_params: ResetParams | None = None,
        turns: TurnRenderer | None = None,
        *,
        base_url: str | None = None,
        message_timeout_s: float = float("inf"),
        tool_calls: ToolCalls = "text",
    ) -> None:
        """`reset_params`: the env's reset signature when its source was read;
        `turns`: how observations become turns (default text, 8,000 chars);
        `base_url`: the server's HTTP address, for listing an MCP env's tools again;
        `message_timeout_s`: the client's own per-message timeout."""
        self.client = client
        self.spec = spec
        self.base_url = base_url
        self.limits = limits
        self.report = EpisodeReport(reward_mode=limits.reward)
        self.turns = turns or TurnRenderer()
        self.label = label
        self.reset_params = reset_params
        self.message_timeout_s = message_timeout_s
        self.native = tool_calls == "native"
        self._reset_at = time.monotonic()
        self.frame: Frame | None = None
        """The last frame the session answered (the reset's, then each step's)."""
        self.task = OpeningTask({})
        """What the opening turn shows, and where it came from (`reset.opening_task`)."""
        self.unknown_keys: list[str] = []
        """Keys of the reset's kwargs the env's `reset` does not take, when known."""
        self.refused: str | None = None
        """Why the last action was not stepped, or was refused, as the model is told."""
        self.start_again: Callable[[BaseException], Awaitable[bool]] | None = None
        """Given a reset's failure: whether the episode moved to a fresh session."""
        self.move: Callable[[BaseException], Awaitable[None]] | None = None
        """Given the loss of the session mid-episode: open a fresh one."""
        self.resumer = Resumer()
        self.explain: Callable[[str, bool], str] = _as_it_is
        """A failure's text with what the launch lacks, by the env's own files
        (unchanged when there is nothing to add); the flag is True for a reset that
        left no episode, False for a later failure."""

    async def reset(self, kwargs: dict[str, Any]) -> Turn:
        """Reset and return the opening turn; a refusal is an `EnvFailure`. A shared
        server lost meanwhile is left for a fresh session (`start_again`)."""
        if self.reset_params is not None:
            self.unknown_keys = self.reset_params.unknown(kwargs)
            _warn_unknown_keys(self.label, self.reset_params, [kwargs])
        while True:
            started = time.perf_counter()
            try:
                self.frame = result = await self.reset_frame(kwargs)
                break
            except EnvFailure as e:
                if self.start_again is None or not await self.start_again(e):
                    raise
        self.report.add_reset(result, time.perf_counter() - started)
        observation = result.observation or {}
        if (refusal := reset_refusal(observation, result.done)) is not None:
            return self._ended_at_reset(refusal)
        self.resumer.log = ReplayLog(dict(kwargs))
        self.resumer.log.saw_reset(result)
        self._reset_at = time.monotonic()
        await self.relist_tools()
        timeout_s = self.limits.step_timeout_s
        self.task = await opening_task(self.client, observation, timeout_s)
        return self.turns.opening(self.task.observation, self.spec, self.native)

    async def reset_frame(self, kwargs: dict[str, Any]) -> Frame:
        return await reset_frame(self.client, kwargs, self.limits, self.label)

    async def relist_tools(self) -> None:
        """An MCP env's tools as they are after reset: an env may start its tool
        server in `reset`, so the list read before can be empty or stale."""
        if not self.spec.is_mcp or self.base_url is None:
            return
        self.spec = await relist_tools(
            self.client, self.base_url, self.spec, self.limits.step_timeout_s
        )

    async def act(self, reply: str, finish_reason: str | None = None) -> Turn:
        """Apply one model reply written as text; the next user turn."""
        return await self._play(
            lambda: parse_action(
                reply,
                self.spec,
                finish_reason=finish_reason,
                delimiters=self.limits.reasoning_delimiters,
            )
        )

    async def reply_without_call(
        self, reply: str, finish_reason: str | None = None
    ) -> Turn:
        """Native tool calling, a reply with no structured tool call: a tool call
        written as text is stepped as that call; else an invalid action."""
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
        """Apply one native tool call; the tool's result as a turn."""
        return await self._play(lambda: call_to_action(tool, arguments, self.spec))

    async def _play(self, read_action: Callable[[], dict[str, Any]]) -> Turn:
        if self.report.done:
            return Turn("The episode is over.", failed=True)
        try:
            action = read_action()
        except InvalidAction as e:
            return self._invalid(str(e))
        return await self.apply(action)

    def no_tool_call(self) -> Turn:
        """The reminder after a reply that called no tool (an invalid action)."""
        report = self.report
        if report.done:
            return Turn("The episode is over.")
        left = report.count_invalid(self.limits.max_invalid_actions)
        if left == 0:
            text = render_invalid_end("the reply called no tool", report.invalid_streak)
        else:
            text = render_no_tool_call(left)
        return self.turns.message(text)

    async def apply(self, action: dict[str, Any]) -> Turn:
        """Step an action already read. An error nothing here foresaw ends only this
        episode, named: raised, verifiers 0.2 would call `respond` again and step the
        env twice for one reply."""
        try:
            return await self._step_and_turn(action)
        except Exception as e:
            logger.exception("%s: the episode failed unexpectedly", self.label)
            return self._failed(f"unexpected error: {describe(e)}")

    async def _step_and_turn(self, action: dict[str, Any]) -> Turn:
        if (stop := self._cannot_step()) is not None:
            return self._failed(stop)
        last = (self.frame.observation if self.frame else None) or {}
        if illegal := illegal_action(action, self.spec, last):
            return self._invalid(illegal)
        log, started = self.resumer.log, time.perf_counter()
        try:
            self.frame = result = await self.resumer.step(self, action)
        except Exception as e:
            if (code := server_error_code(e)) is not None and log is not None:
                log.saw_refusal(action, code)
            timeout_s = self.limits.step_timeout_s
            refusal = await step_refusal(e, self.client, timeout_s)
            if refusal.invalid:
                return self._invalid(refusal.problem)
            return self._failed(refusal.problem)
        seconds = time.perf_counter() - started
        self.report.add_step(result, seconds, self.limits.reward_range)
        if log is not None:
            log.saw_step(action, result)
        if (lacks := _lacking(result.observation or {}, self.explain)) is not None:
            return self._failed(lacks)
        return self._turn_after(result.observation or {})

    def _cannot_step(self) -> str | None:
        budget = self.limits.episode_timeout_s
        if budget is not None and time.monotonic() - self._reset_at > budget:
            return (
                f"the episode budget of {budget:.0f}s "
                f"({setting('episode_timeout_s')}) is spent"
            )
        return None

    def _turn_after(self, observation: dict[str, Any]) -> Turn:
        """The turn after an answered step; a failed MCP tool call is also invalid."""
        report = self.report
        tools_note = self._take_new_tools(observation)
        if tool_error(observation) is None:
            report.invalid_streak = 0
            turn = self.turns.observation(observation, reserve=len(tools_note))
            turn.text += tools_note
            return turn
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

    def _take_new_tools(self, observation: dict[str, Any]) -> str:
        """Tools a step reports replace the known ones; a note telling the model
        of a change (text mode), else ''."""
        tools = tools_in(observation) if self.spec.is_mcp else None
        if tools is None or tools == self.spec.tools:
            return ""
        self.spec = dataclasses.replace(self.spec, tools=tools)
        if self.native:
            return ""
        return "\n\nThe tools changed.\n" + render_action_format(self.spec)

    async def send(self, action: dict[str, Any]) -> Frame:
        """`client.step` within `step_timeout_s`, validated. A timer of our own is
        armed only when the client's own timeout is longer (it costs more than a
        local env's step)."""
        if self.limits.step_timeout_s >= self.message_timeout_s:
            return read_frame(await self.client.step(action))
        async with asyncio.timeout(self.limits.step_timeout_s):
            return read_frame(await self.client.step(action))

    def _invalid(self, problem: str) -> Turn:
        self.refused = problem
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
        message = redact(message, self.secrets)
        self.report.fail(
            self.explain(
                f"{self.label}: {message} (after {self.report.steps} steps)", False
            )
        )
        return self._over(message)

    def _ended_at_reset(self, refusal: str) -> Turn:
        refusal = redact(refusal, self.secrets)
        self.report.end_at_reset(
            self.explain(f"{self.label}: {refusal}; it cannot be played", True)
        )
        return self._over(refusal)

    def _over(self, message: str) -> Turn:
        turn = self.turns.message(
            f"The environment failed: {message}. The episode is over."
        )
        turn.failed = True
        return turn


def _as_it_is(text: str, at_reset: bool) -> str:
    return text


def _lacking(
    observation: dict[str, Any], explain: Callable[[str, bool], str]
) -> str | None:
    """Why a step failed on what the launch does not pass (a failed reply whose text
    `explain` adds to), or None: any other failed reply is the model's to read."""
    said = tool_error(observation) or said_failure(observation)
    if said is None or explain(said, False) == said:
        return None
    return f"the step failed on what the env lacks: {said}"


def episode_client(client: Any, target: EnvTarget) -> Any:
    """An opened client of `target` as an episode talks to it: frames guarded and
    error details kept (`guard_frames`), MCP steps routed (`route_mcp_steps`)."""
    client = guard_frames(client)
    return route_mcp_steps(client, env_source_dir(target), target.label)


async def open_episode(
    target: EnvTarget,
    limits: EpisodeLimits,
    stack: contextlib.AsyncExitStack,
    *,
    observation_format: ObservationFormat = "text",
    observation_images: bool = True,
    max_observation_chars: int = MAX_OBSERVATION_CHARS,
    tool_calls: ToolCalls = "text",
    on_launch: Callable[[Any], None] | None = None,
    on_connect: Callable[[str], Awaitable[None]] | None = None,
) -> EnvEpisode:
    """Launch or connect (closed by `stack`) and read the action contract: an episode
    ready for `reset`, its failure texts redacted of `forward_env` values. A shared
    server lost before the first model turn is left for a fresh session
    (`EnvSession.start_again`); one lost later moves (`EnvSession.move`) and the
    episode resumes by replay. `on_launch` is given the launcher of the episode's own
    launch; `on_connect` is awaited with the server's HTTP base before the contract
    is read."""
    source = env_source_dir(target)
    session = EnvSession(target, stack, on_launch=on_launch)
    connect = functools.partial(_open_contract, target, session, limits.step_timeout_s)

    async def start_again(exc: BaseException) -> bool:
        if not await session.start_again(exc):
            return False
        episode.client, episode.base_url, episode.spec = await connect()
        return True

    async def move(exc: BaseException) -> None:
        await session.move(exc)
        episode.client, episode.base_url, episode.spec = await connect()

    client, base_url, spec = await connect(on_connect)
    params = None
    if source:
        recent = recent_reset_params(source)
        params = (
            recent[0] if recent else await asyncio.to_thread(read_reset_params, source)
        )
    episode = EnvEpisode(
        client,
        spec,
        limits,
        target.label,
        params,
        TurnRenderer(observation_format, observation_images, max_observation_chars),
        base_url=base_url,
        message_timeout_s=target.message_timeout_s,
        tool_calls=tool_calls,
    )
    episode.secrets = tuple(target.secret_env.values())
    episode.start_again = start_again
    episode.move = move
    return episode


async def _open_contract(
    target: EnvTarget,
    session: EnvSession,
    timeout_s: float,
    on_connect: Callable[[str], Awaitable[None]] | None = None,
) -> tuple[Any, str, ActionSpec]:
    """The connected client, its HTTP base and its action contract; a read that
    loses its shared server is tried again on a fresh `session`."""
    while True:
        client = episode_client(await session.open(), target)
        base_url = http_base(client.base_url or target.label)
        if on_connect is not None:
            await on_connect(base_url)
            on_connect = None
        try:
            return (
                client,
                base_url,
                await fetch_action_spec(
                    client,
                    base_url,
                    timeout_s,
                    target.connect_timeout_s,
                    session.contracts,
                ),
            )
        except EnvFailure as e:
            if not await session.start_again(e):
                raise


def warn_unknown_reset_kwargs(
    target: EnvTarget, resets: Sequence[Mapping[str, Any]]
) -> None:
    """Log, once per key, each reset kwarg of `resets` the env's `reset` does not
    take, when the target is launched from local source (which tells)."""
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
        logger.warning("%s: %s", label, params.unknown_note([key], share))
