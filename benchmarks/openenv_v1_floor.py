"""The framework floor: a taskset whose user simulator has no environment at all.

Each rollout still pays everything verifiers itself costs (its per-rollout user
process, the harness, the model calls, CLI start-up), but no env server, no OpenEnv
client and no reset or step: five canned turns, then done. No adapter can be faster,
so `benchmarks/run.py` measures the others against it. Its simulator starts as ours
does, without the packages a simulator never uses (`openenv_v1.vf02.simulator.light_verifiers`).

    PYTHONPATH=benchmarks uv run eval openenv-v1-floor -n 6 -c 6 ...
"""

from __future__ import annotations

if __name__ == "__main__":
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()

from collections.abc import Iterator

import verifiers.v1 as vf

TURNS = 5


class FloorData(vf.TaskData):
    pass


class FloorState(vf.State):
    turns: int = 0


class FloorUser(vf.User[vf.UserConfig, FloorState]):
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
