"""The framework floor on verifiers 0.4: an env with no OpenEnv behind it.

Each rollout pays everything verifiers 0.4 itself costs (the eval or env-server
process, the interaction, this package's chat harness, the model calls) but no env
server, no OpenEnv client, no reset and no step: it plays `turns` model turns of
canned text, then stops. No adapter can be faster, so `benchmarks/scale.py` divides
the `vf04` leg's wall time and throughput by this one's at the same level and the
same number of model turns per episode (`ours / floor`).

    PYTHONPATH=benchmarks vf-eval openenv-v1-floor-vf04 \
        --env.taskset.turns '[5, 4, 6]' -m local-policy ...
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator

import verifiers.v1 as vf
from pydantic import Field

from openenv_v1.chat_calls import rollout_clients
from openenv_v1.vf04.chat import OpenEnvChatHarness

STOP_FLOOR = "floor_done"
CANNED_TURNS = 5
"""Turns of canned text an empty `texts_file` entry plays (a seed the `vf04` leg did
not play well; the local Wordle env's solver needs 4.4 on average)."""


class FloorData(vf.TaskData):
    turns: int
    """Model turns this episode plays."""
    index: int = 0
    """Its entry in `texts_file`, if one is given."""


class FloorTask(vf.Task[FloorData]):
    pass


class FloorConfig(vf.TasksetConfig):
    turns: list[int] = Field(default_factory=lambda: [5] * 64)
    """One task per entry: how many model turns its episode plays."""
    texts_file: str | None = None
    """A JSON list, one entry per task (in place of `turns`): the user texts its
    episode shows, one a turn (empty: `CANNED_TURNS` canned ones). They stay out of
    the task data, as an OpenEnv episode's observations do."""


class FloorTaskset(vf.Taskset[FloorTask, FloorConfig]):
    def load(self) -> Iterator[FloorTask]:
        texts = self.texts
        counts = [len(t) or CANNED_TURNS for t in texts] if texts else self.config.turns
        for idx, turns in enumerate(counts):
            yield FloorTask(
                FloorData(name=f"floor#{idx}", prompt=None, turns=turns, index=idx),
                self.config.task,
            )

    @functools.cached_property
    def texts(self) -> list[list[str]]:
        """`texts_file`'s entries ([] without one)."""
        path = self.config.texts_file
        if path is None:
            return []
        with open(path) as f:
            return json.load(f)


class FloorEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())
    """The model, with this package's chat harness (as the `vf04` leg plays)."""


class FloorEnv(vf.Env[FloorEnvConfig]):
    async def run(self, task: vf.Task, agents: vf.Agents) -> None:
        data = task.data
        assert isinstance(data, FloorData)
        assert isinstance(self.taskset, FloorTaskset)
        texts = self.taskset.texts
        shown = texts[data.index] if texts else []
        async with (
            agents.player.interaction(task) as interaction,
            rollout_clients(interaction.trace.id),
        ):
            for turn in range(1, data.turns + 1):
                text = (
                    shown[turn - 1]
                    if shown
                    else f"Turn {turn}: guess a five-letter word, e.g. [crane]."
                )
                segment = await interaction.turn([vf.UserMessage(content=text)])
                if segment.terminated:
                    return
            interaction.trace.record_reward("floor_reward", 0.0)
            interaction.trace.stop(STOP_FLOOR)


class FloorHarness(OpenEnvChatHarness):
    pass


__all__ = ["FloorConfig", "FloorEnv", "FloorHarness", "FloorTaskset"]
