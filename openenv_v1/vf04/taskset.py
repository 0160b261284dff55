"""Tasks of an OpenEnv taskset on verifiers 0.4: one per entry of `resets`, or the
env's own (OpenEnv's Task API, when `resets` is unset and the server offers it).

    taskset = OpenEnvTaskset(OpenEnvConfig(env="openenv/wordle", resets=[{"seed": 1}]))
    tasks = list(taskset)   # one OpenEnvTask per reset, name "openenv/wordle#0"
    OpenEnvConfig(base_url=url, split="test")   # tasks "test#0", "test#1", ...

A task's data is `openenv_v1.taskset_core.OpenEnvData` (the same on both lines);
`prompt` is None: the env opens the conversation with the reset observation. The
env's tasks are listed from `base_url`, or else from a launch of the env for the
listing only (the shared servers start later, in the env's `start()`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

import verifiers.v1 as vf

from openenv_v1.core.tasks import task_key
from openenv_v1.taskset_core import OpenEnvData, TasksetCore, prepare_eval_process
from openenv_v1.vf04.config import OpenEnvConfig


class OpenEnvTask(vf.Task[OpenEnvData]):
    @property
    def key(self) -> str:
        """What the task is, so a reordered or extended `resets` list resumes."""
        return self.data.key or super().key

    @property
    def hash(self) -> str:
        """The task's content without its position (`idx` and the name's `#idx`,
        which verifiers' content hash would include): verifiers 0.4.0's `--resume`
        matches saved episodes to tasks by this hash."""
        if not self.data.key:
            return super().hash
        # How the model acts (`tool_calls`) is not what the task is.
        data = self.data.model_dump(
            mode="json", exclude_none=True, exclude={"idx", "name", "tool_calls"}
        )
        return task_key(self.data.key, data)


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvConfig]):
    """One task per reset; fails at once, naming the flags, without an env. Building
    it settles this process for the eval (`prepare_eval_process`). Its `core`
    (`openenv_v1.taskset_core.TasksetCore`) is what the env's episodes are opened
    from; its config carries the env's manifest defaults."""

    def __init__(self, config: OpenEnvConfig) -> None:
        prepare_eval_process(config.server_home)
        self.core = TasksetCore.build(config, config)
        # The episode settings are this config's own: the same config, with the
        # defaults of the env's openenv.yaml.
        super().__init__(cast(OpenEnvConfig, self.core.episode))

    def load(self) -> Iterator[OpenEnvTask]:
        for data in self.core.task_data():
            yield OpenEnvTask(data, self.config.task)
