"""The framework floor: a taskset whose user simulator has no environment at all.

Each rollout still pays everything verifiers itself costs (its per-rollout user
process, the harness, the model calls, CLI start-up), but no env server, no OpenEnv
client and no reset or step: five canned turns, then done. No adapter can be faster,
so `benchmarks/run.py` measures the others against it. Its simulator starts as ours
does, without the packages a simulator never uses (`openenv_v1.vf02.simulator.light_verifiers`),
and serves its turns as ours does (`openenv_v1.vf02.simulator.serving`: no Nagle, no
per-request logs, metadata read or output schema; the rollout state it last pushed
reused, since nothing else writes it), so a turn's hop here is verifiers' own at its
cheapest (`benchmarks/real_model.py` subtracts it).

    PYTHONPATH=benchmarks uv run eval openenv-v1-floor -n 6 -c 6 ...
"""

from __future__ import annotations

if __name__ == "__main__":
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()

from collections.abc import Iterator
from typing import TYPE_CHECKING

import verifiers.v1 as vf

from openenv_v1.vf02.simulator.serving import (
    no_delay_listeners,
    pin_version,
    quiet_request_logs,
    unstructured,
)

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

TURNS = 5


class FloorData(vf.TaskData):
    pass


class FloorState(vf.State):
    turns: int = 0


class FloorUser(vf.User[vf.UserConfig, FloorState]):
    _pushed: bytes | None = None

    async def setup(self) -> None:
        no_delay_listeners()
        quiet_request_logs()

    def _register(self, mcp: FastMCP) -> None:
        super()._register(mcp)
        pin_version(mcp)
        unstructured(mcp, "respond")

    async def _pull_state(self) -> FloorState:
        if self._pushed is not None:
            return self._state_adapter.validate_json(self._pushed)
        return await super()._pull_state()

    async def _push_state(self, before: bytes) -> None:
        self._pushed = None
        await super()._push_state(before)
        self._pushed = self._state_adapter.dump_json(self.state)

    async def setup_task(self, task: FloorData) -> None:
        return None

    async def respond(self, message: str) -> vf.Messages:
        self.state.turns += 1
        return [vf.UserMessage(content=f"Turn {self.state.turns}: guess a word.")]


class FloorTaskConfig(vf.TaskConfig):
    user: vf.UserConfig = vf.UserConfig()


class FloorTask(vf.Task[FloorData, FloorState, FloorTaskConfig]):
    user = FloorUser

    @vf.stop
    async def floor_done(self, trace: vf.Trace) -> bool:
        return trace.state.turns > TURNS

    @vf.reward
    async def floor_reward(self, trace: vf.Trace) -> float:
        return 0.0


class FloorConfig(vf.TasksetConfig):
    episodes: int = 64
    task: FloorTaskConfig = FloorTaskConfig()


class FloorTaskset(vf.Taskset[FloorTask, FloorConfig]):
    def load(self) -> Iterator[FloorTask]:
        for idx in range(self.config.episodes):
            yield FloorTask(
                FloorData(idx=idx, name=f"floor#{idx}", prompt=None), self.config.task
            )


__all__ = ["FloorConfig", "FloorTaskset"]

if __name__ == "__main__":
    FloorUser.run()
