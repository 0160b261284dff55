"""`OpenEnvEnv`: one OpenEnv episode per rollout, played in the eval process.

verifiers 0.4 has no user simulator: an `Env` drives its agents. This one opens and
resets an episode through the taskset core (`openenv_v1.taskset_core.open_and_reset`)
and opens the conversation with the reset observation; each reply of the player
becomes a step and the next observation the next user turn, until the env is `done`,
the invalid actions run out, or the player stops. With native tool calling the
episode's tools are lent to the chat harness for the play (`openenv_v1.vf04.native`);
a reply that calls no tool is stepped as the tool call its text writes, if any, else
gets a reminder, counted as an invalid action. Each reply goes to the episode with
its `finish_reason` (a reply cut at the length limit is no action).

The account is written onto the trace on every path (`record`), so an env failure
keeps what was earned; it then fails the rollout with an error naming the cause.
"""

from __future__ import annotations

import contextlib

import anyio
import verifiers.v1 as vf

from openenv_v1.chat_calls import rollout_clients
from openenv_v1.core import EnvEpisode, EpisodeReport
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.errors import EnvFailure, setup_failure
from openenv_v1.core.launch.pool import LocalLeases, ServerPool
from openenv_v1.core.launch.url_pool import UrlPool
from openenv_v1.core.setting_names import render_settings
from openenv_v1.settings import env_target
from openenv_v1.taskset_core import TasksetCore, open_and_reset, user_message
from openenv_v1.trace_account import publish_account
from openenv_v1.vf04.chat import OpenEnvChatHarness
from openenv_v1.vf04.config import OpenEnvConfig, OpenEnvEnvConfig
from openenv_v1.vf04.flags import VF_EVAL_FLAGS
from openenv_v1.vf04.native import lend
from openenv_v1.vf04.taskset import OpenEnvTaskset

STOP_DONE = "openenv_done"
STOP_INVALID = "openenv_invalid_actions"


class OpenEnvError(vf.EnvError):
    """The environment failed (launch, connect, reset, a dropped session, a step
    error or timeout); the message names the cause and what to change."""


class OpenEnvEnv(vf.Env[OpenEnvEnvConfig]):
    def __init__(self, config: OpenEnvEnvConfig) -> None:
        super().__init__(config)
        assert isinstance(self.taskset, OpenEnvTaskset)
        self.core: TasksetCore = self.taskset.core
        self.openenv: OpenEnvConfig = self.taskset.config
        if self.openenv.tool_calls == "native":
            self._require_chat_harness(config)
        self.pool: ServerPool | UrlPool | None = None
        self._leases: LocalLeases | None = None

    def _require_chat_harness(self, config: OpenEnvEnvConfig) -> None:
        """Native tool calls run in this package's chat harness; fail at once,
        naming the flags, when the player has another."""
        from verifiers.v1.utils.loaders import harness_class

        harness = self._agent_harness(config.player)
        if not issubclass(harness_class(harness.id), OpenEnvChatHarness):
            raise ValueError(
                f"tool_calls native runs the tool calls in this package's chat "
                f"harness, but the player's harness is {harness.id!r}: drop "
                "--env.player.harness.id, or use --env.taskset.tool-calls text"
            )

    async def start(self) -> None:
        """Launch the shared env servers (UV), if rollouts share them, or start the
        desk of a `base_url` list's running servers."""
        if self.openenv.leases_servers():
            self.pool = self.core.start_pool()
            # The first server is launched from the pool's own thread, which owns
            # the servers' parent-death signal; this returns at once. Episodes run
            # in this process, so they lease in process: no socket, no thread.
            try:  # a bad launch option fails here
                self._leases = self.pool.local()
            except EnvFailure as e:
                raise ValueError(render_settings(str(e), VF_EVAL_FLAGS)) from None

    async def stop(self) -> None:
        """Stop the shared env servers (their whole process groups); a `base_url`
        list's desk stops leasing, and its servers run on."""
        pool, self.pool, self._leases = self.pool, None, None
        if pool is not None:
            await anyio.to_thread.run_sync(pool.close)

    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        target = env_target(
            data, self.openenv, secret_env=self.core.secret_env, pool=self._leases
        )
        async with contextlib.AsyncExitStack() as stack:
            # A failure before the first turn fails the episode at once, before any
            # model call (there is nothing to keep yet).
            try:
                episode, turn = await open_and_reset(target, self.openenv, stack, data)
            except Exception as e:
                failure = setup_failure(target.label, e, target.secret_env.values())
                raise OpenEnvError(render_settings(failure, VF_EVAL_FLAGS)) from None
            report = episode.report
            async with agents.player.interaction(task) as interaction:
                lent = (
                    lend(interaction.trace.id, episode)
                    if episode.native
                    else contextlib.nullcontext()
                )
                try:
                    async with rollout_clients(interaction.trace.id):
                        with lent:
                            await self._play(interaction, episode, turn)
                finally:
                    record(interaction.trace, report)
                if report.error is not None:
                    raise OpenEnvError(render_settings(report.error, VF_EVAL_FLAGS))

    async def _play(
        self, interaction: vf.Interaction, episode: EnvEpisode, turn: Turn
    ) -> None:
        """Alternate turns and steps until the env is done, the invalid actions run
        out, the player's run ends, or the env fails."""
        report: EpisodeReport = episode.report
        while not report.done:
            segment = await interaction.turn([user_message(turn)])
            if segment.terminated:
                return  # a turn limit or the player's own stop ended the run
            finish = last_finish_reason(interaction.trace)
            if episode.native:
                # The harness stepped the tool calls; it returns with the episode
                # still on only after a reply that called no tool.
                turn = await episode.reply_without_call(segment.last_reply, finish)
            else:
                turn = await episode.act(segment.last_reply, finish)
        if report.stop_reason == "invalid_actions":
            # The model gets the last feedback turn only if it could act on it.
            interaction.trace.stop(STOP_INVALID)
        elif report.stop_reason == "done":
            interaction.trace.stop(STOP_DONE)


def last_finish_reason(trace: vf.Trace) -> str | None:
    """Why the model stopped in the last answered call (`length`: cut off)."""
    last = next((c for c in reversed(trace.calls) if c.error is None), None)
    return last.finish_reason if last else None


def record(trace: vf.Trace, report: EpisodeReport) -> None:
    """The episode account onto the trace: reward (None, unscored, when the env gave
    none), metrics, `info["openenv"]` and the env's own time in
    `info["openenv_timing"]`."""
    reward = report.final_reward()
    if reward is None:
        trace.rewards["openenv_reward"] = None  # unscored, never 0.0
    else:
        trace.record_reward("openenv_reward", reward)
    trace.record_metric("openenv_unscored", 0.0 if report.scored else 1.0)
    trace.record_metric("openenv_rewards_outside_range", report.rewards_outside)
    trace.record_metric("openenv_steps", report.steps)
    trace.record_metric("openenv_ended_at_reset", float(report.ended_at_reset))
    trace.record_metric("openenv_invalid_action_count", report.invalid_actions)
    trace.record_metric("openenv_resumed", len(report.resumes))
    for name, value in report.signals.items():
        trace.record_metric(f"openenv_signal_{name}", value)
    publish_account(trace.info, report, VF_EVAL_FLAGS)


__all__ = ["OpenEnvEnv", "OpenEnvError"]
