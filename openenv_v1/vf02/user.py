"""`OpenEnvUser`: the verifiers user simulator that plays one OpenEnv episode.

verifiers runs it per rollout as `python -m openenv_v1.vf02.user`. `setup_task`
opens and resets the episode through the taskset core
(`openenv_v1.taskset_core.open_and_reset`; its exit stack closes it); `respond`
steps each model reply (`EnvEpisode`) and returns the turn as a user message. With
native tool calling it leaves the model's tools and its desk's address on the
rollout state before it serves, and steps each forwarded call once
(`openenv_v1.vf02.tool_desk`).

Neither hook raises for an env failure, on purpose: a raising `setup_task` leaves the
server unserved while verifiers keeps probing it for minutes, and a raising `respond`
reaches the trace only as an unreadable JSON error. Instead the failure is put on the
rollout state, and the task's `openenv_done` stop raises it as the rollout's error.
"""

from __future__ import annotations

if __name__ == "__main__":
    # First of all: this process holds the rollout's state channel secret in its
    # environment; no env server of the same user may read it (`server_env`).
    from openenv_v1.core.launch.server_env import hide_this_process

    hide_this_process()
    # Before verifiers is imported, and only in the simulator process: become a fork
    # of the taskset's fork server (exits here), or else import only what is used.
    from openenv_v1.vf02.simulator.launcher import run_forked

    run_forked()
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()

import logging
from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.core import EnvEpisode, EpisodeReport
from openenv_v1.core.episode.turns import Turn, TurnRenderer
from openenv_v1.core.errors import describe, setup_failure
from openenv_v1.core.setting_names import render_settings
from openenv_v1.settings import env_target
from openenv_v1.taskset_core import OpenEnvData, open_and_reset, user_message
from openenv_v1.vf02.account import absorb_invalid, mirror
from openenv_v1.vf02.config import OpenEnvUserConfig
from openenv_v1.vf02.flags import EVAL_FLAGS
from openenv_v1.vf02.simulator.forked import simulator_pid
from openenv_v1.vf02.simulator.serving import (
    no_delay_listeners,
    pin_version,
    quiet_request_logs,
    unstructured,
)
from openenv_v1.vf02.state import OpenEnvState
from openenv_v1.vf02.tool_desk import ToolDesk, open_desk

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

logger = logging.getLogger(__name__)


class OpenEnvUser(vf.User[OpenEnvUserConfig, OpenEnvState]):
    _pushed: bytes | None = None
    """The rollout state as this simulator last pushed it (None: not yet, or the
    push failed)."""
    _state_is_ours = False
    """Text mode: no other process writes the rollout state (`_pull_state`)."""

    async def setup(self) -> None:
        """Before the server serves, its socket bound: its connections without
        Nagle, or each turn may wait 40 ms, and no INFO line per request
        (`openenv_v1.vf02.simulator.serving`)."""
        no_delay_listeners()
        quiet_request_logs()

    def _register(self, mcp: FastMCP) -> None:
        super()._register(mcp)
        pin_version(mcp)  # no metadata read per request (`serving`)
        unstructured(mcp, "respond")  # no output schema checked per turn

    async def _pull_state(self) -> OpenEnvState:
        """The rollout state before a call. verifiers pulls it from the eval (a round
        trip to its event loop) before every call. In text mode nothing but this
        simulator writes it (the task's stops, reward and metrics only read it), so
        the state it last pushed is current and is used as it is. With native tool
        calling the eval counts calls on it: pulled."""
        if self._state_is_ours and self._pushed is not None:
            return self._state_adapter.validate_json(self._pushed)
        return await super()._pull_state()

    async def _push_state(self, before: bytes) -> None:
        self._pushed = None
        await super()._push_state(before)
        self._pushed = self._state_adapter.dump_json(self.state)

    async def setup_task(self, task: OpenEnvData) -> None:
        self._state_is_ours = task.tool_calls != "native"
        self._desk: ToolDesk | None = None
        self._episode: EnvEpisode | None = None
        self._opening: Turn | None = None
        self._failure: str | None = None
        config = self.config
        target = env_target(
            task, config, secret_env=config.secret_env, pool_url=config.pool_url
        )
        try:
            self._episode, self._opening = await open_and_reset(
                target, config, self._exit_stack, task
            )
        except Exception as e:
            failure = setup_failure(target.label, e, target.secret_env.values())
            self._failure = render_settings(failure, EVAL_FLAGS)
        if task.tool_calls == "native" and self._episode is not None:
            try:
                await self._publish_tools(self._episode)
                self._desk = ToolDesk(self._episode)
            except Exception as e:
                logger.exception("publishing the tools failed")
                self._failure = f"{target.label}: publishing the tools: {describe(e)}"

    async def _publish_tools(self, episode: EnvEpisode) -> None:
        """Leave the model's tools and this server's address on the rollout state,
        before it serves (and so before the harness lists the tools)."""
        tools = [
            {
                "name": t.name,
                "description": t.description,
                "input_schema": t.input_schema,
            }
            for t in episode.spec.model_tools()
        ]
        url = await open_desk(self._with_state(self._deliver), self._exit_stack)

        def publish() -> None:
            self.state.tools, self.state.tool_desk = tools, url

        # verifiers syncs the state around calls only; this runs before any.
        await self._with_state(publish)()

    async def _deliver(self, name: str, arguments: dict[str, Any]) -> Turn:
        assert self._desk is not None
        return await self._desk.deliver(self.state, name, arguments)

    async def respond(self, message: str) -> vf.Messages:
        self.state.simulator_pid = simulator_pid()
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
            elif self._desk is not None:
                # A reply that called no tool gets a reminder, counted as invalid
                # (with the calls the eval process counted).
                absorb_invalid(report, self.state)
                turn = await self._episode.reply_without_call(message)
            else:
                turn = await self._episode.act(message)
        mirror(report, self.state)
        return [user_message(turn)]


if __name__ == "__main__":
    OpenEnvUser.run()
