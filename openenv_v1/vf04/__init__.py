"""The verifiers 0.4 binding of `openenv_v1.core`: an OpenEnv env as a taskset, its
env (played in the eval process) and an in-process chat harness.

    vf-eval openenv-v1 --env.taskset.env openenv/echo-env -m <model>
    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000 -m <model>

    config.py   OpenEnvConfig: env / base_url / use_docker, resets, limits
    taskset.py  OpenEnvTaskset: one task per reset
    env.py      OpenEnvEnv: shared servers (start/stop), one episode per rollout
    chat.py     OpenEnvChatHarness: one model call per turn, no program per turn
    native.py   native tool calls: the episode lent to the harness, one step per call
"""

from openenv_v1.vf04.chat import OpenEnvChatHarness, OpenEnvChatHarnessConfig
from openenv_v1.vf04.config import OpenEnvConfig, OpenEnvEnvConfig
from openenv_v1.vf04.env import OpenEnvEnv, OpenEnvError
from openenv_v1.vf04.taskset import OpenEnvData, OpenEnvTask, OpenEnvTaskset

__all__ = [
    "OpenEnvChatHarness",
    "OpenEnvChatHarnessConfig",
    "OpenEnvConfig",
    "OpenEnvData",
    "OpenEnvEnv",
    "OpenEnvEnvConfig",
    "OpenEnvError",
    "OpenEnvTask",
    "OpenEnvTaskset",
]
