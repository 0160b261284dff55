"""Run any OpenEnv environment as a verifiers V1 taskset.

    uv run eval openenv-v1 --taskset.env openenv/echo-env
    uv run eval openenv-v1 --taskset.base-url http://127.0.0.1:8000 --harness.id null

Subclass `OpenEnvConfig` to pin an env and its launch defaults (see
`openenv_wordle_v1`). The OpenEnv-facing machinery lives in `openenv_v1.core`.
"""

from openenv_v1.config import OpenEnvConfig, OpenEnvTaskConfig, OpenEnvUserConfig
from openenv_v1.taskset import OpenEnvTask, OpenEnvTaskset
from openenv_v1.user import OpenEnvData, OpenEnvState, OpenEnvUser

__all__ = [
    "OpenEnvConfig",
    "OpenEnvData",
    "OpenEnvState",
    "OpenEnvTask",
    "OpenEnvTaskConfig",
    "OpenEnvTaskset",
    "OpenEnvUser",
    "OpenEnvUserConfig",
]
