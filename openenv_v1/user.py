"""`OpenEnvUser`: the verifiers user simulator that plays one OpenEnv episode.

verifiers runs it per rollout as `python -m openenv_v1.user`. `setup_task` launches or
connects (everything opened is closed by the user's exit stack), reads the action
contract and resets; `respond` turns each model reply into a step via `EnvEpisode`,
and each turn it returns into a user message: its text, then its images as
`image_url` parts (`user_message`).

With native tool calling (`tool_calls="native"`) the env session belongs to the
rollout's tool server instead (`openenv_v1.tools`, which says why); this simulator then
only opens the conversation with the opening turn that server left on the rollout
state, and answers a reply that calls no tool with a reminder, counted as invalid.

Neither hook raises for an env failure, on purpose: a raising `setup_task` leaves the
server unserved while verifiers keeps probing it for minutes, and a raising `respond`
reaches the trace only as an unreadable JSON error. Instead the failure is put on the
rollout state, and the task's `openenv_done` stop raises it as the rollout's error.
"""

from __future__ import annotations

import logging
from typing import Any

import verifiers.v1 as vf

from openenv_v1.config import OpenEnvUserConfig
from openenv_v1.core import (
    EnvEpisode,
    EnvFailure,
    EnvTarget,
    EpisodeReport,
    open_episode,
)
from openenv_v1.core.episode import ToolCalls
from openenv_v1.core.errors import describe
from openenv_v1.core.render import render_invalid_end, render_no_tool_call
from openenv_v1.core.turns import Turn, TurnRenderer

logger = logging.getLogger(__name__)


class OpenEnvData(vf.TaskData):
    env: str | None
    """OpenEnv environment id to launch (None when connecting to `base_url`)."""
    base_url: str | None
    use_docker: bool
    reset: dict[str, Any]
    """Keyword arguments for the env's `reset`."""
    tool_calls: ToolCalls = "text"
    """How the model acts: replies written as text, or native tool calls."""


class OpenEnvState(vf.State):
    reward: float = 0.0
    """Sum of the step rewards so far."""
    done: bool = False
    steps: int = 0
    invalid_actions: int = 0
    invalid_streak: int = 0
    """Invalid actions in a row (native tool calling counts them in two processes)."""
    stop_reason: str | None = None
    """`done`, `invalid_actions` or `error` once the episode is over."""
    error: str | None = None
    signals: dict[str, float] = {}
    opening: list[dict[str, Any]] | None = None
    """Native tool calling: the opening user message (wire form), left by the tool
    server for the simulator, which clears it once sent."""
    tool_names: list[str] | None = None
    """Native tool calling: the tools the model was given (None in text mode)."""
    turn: int = 0
    """Native tool calling: model turns so far, stamped before each model call (the
    tool server tells a retried call from a new one by it)."""


class OpenEnvUser(vf.User[OpenEnvUserConfig, OpenEnvState]):
    async def setup_task(self, task: OpenEnvData) -> None:
        self._episode: EnvEpisode | None = None
        self._opening: Turn | None = None
        self._failure: str | None = None
        self._native = task.tool_calls == "native"
        self._opened = False
        if self._native:
            return  # the tool server owns the env session
        config = self.config
        target = EnvTarget(
            env=task.env,
            base_url=task.base_url,
            use_docker=task.use_docker,
            provider_kwargs=config.provider_kwargs,
            secret_env=config.secret_env,
            pool_url=None if task.base_url else config.pool_url,
            launch_timeout_s=config.launch_timeout_s,
            connect_timeout_s=config.connect_timeout_s,
            message_timeout_s=config.message_timeout_s(),
            web_ui=config.server_web_ui,
        )
        try:
            episode = await open_episode(
                target,
                config.limits(),
                self._exit_stack,
                observation_format=config.observation_format,
                observation_images=config.observation_images,
                max_observation_chars=config.max_observation_chars,
            )
            self._opening = await episode.reset(task.reset)
            self._episode = episode
        except EnvFailure as e:
            self._failure = str(e)
        except Exception as e:
            logger.exception("OpenEnv setup failed")
            self._failure = f"{target.label}: setup failed: {describe(e)}"

    async def respond(self, message: str) -> vf.Messages:
        if self._native:
            return self._respond_native()
        if self._failure is not None:
            report = EpisodeReport()
            report.fail(self._failure)
            turn = Turn(
                TurnRenderer.clip(
                    f"The environment failed: {self._failure}",
                    self.config.max_observation_chars,
                )
            )
        else:
            assert self._episode is not None
            report = self._episode.report
            if self._opening is not None:
                # The first call opens the conversation; later empty ones are replies.
                turn, self._opening = self._opening, None
            else:
                turn = await self._episode.act(message)
        self._mirror(report)
        return [user_message(turn)]

    def _mirror(self, report: EpisodeReport) -> None:
        mirror(report, self.state)

    def _respond_native(self) -> vf.Messages:
        """The opening the tool server left on the state, then, for each reply that
        called no tool, a reminder (counted as an invalid action)."""
        state = self.state
        if not self._opened:
            self._opened = True
            if state.error is None and state.opening is not None:
                opening, state.opening = state.opening, None
                return opening
            state.error = state.error or (
                "the OpenEnv tool server left no opening turn on the rollout state"
            )
            state.done, state.stop_reason = True, "error"
            return [self._text(f"The environment failed: {state.error}")]
        report = account(state)
        if report.done:
            return [self._text("The episode is over.")]
        left = report.count_invalid(self.config.max_invalid_actions)
        mirror(report, state)
        if left == 0:
            problem = "the reply called no tool"
            return [self._text(render_invalid_end(problem, report.invalid_streak))]
        return [self._text(render_no_tool_call(left))]

    def _text(self, text: str) -> vf.UserMessage:
        return vf.UserMessage(
            content=TurnRenderer.clip(text, self.config.max_observation_chars)
        )


def mirror(report: EpisodeReport, state: OpenEnvState) -> None:
    """Copy the episode account onto the rollout state the task reads."""
    state.reward = report.reward
    state.done = report.done
    state.steps = report.steps
    state.invalid_actions = report.invalid_actions
    state.invalid_streak = report.invalid_streak
    state.stop_reason = report.stop_reason
    state.error = report.error
    state.signals = dict(report.signals)


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
    )


def user_message(turn: Turn) -> vf.UserMessage:
    """The turn as a user message: its text, then its images as data-URL image parts
    (OpenAI's `image_url` content parts, which verifiers passes to the model as is)."""
    if not turn.images:
        return vf.UserMessage(content=turn.text)
    parts: list[vf.ContentPart] = [vf.TextContentPart(text=turn.text)]
    parts += [
        vf.ImageUrlContentPart(image_url=vf.ImageUrlSource(url=image.data_url()))
        for image in turn.images
    ]
    return vf.UserMessage(content=parts)


if __name__ == "__main__":
    OpenEnvUser.run()
