"""The verifiers 0.4 binding of `openenv_v1.core`: an OpenEnv env as a taskset, its
env (played in the eval process) and an in-process chat harness.

    vf-eval openenv-v1 --env.taskset.env openenv/echo-env -m <model>
    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000 -m <model>
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_v1.core.light_import import lazy_exports

if TYPE_CHECKING:
    from openenv_v1.taskset_core import OpenEnvData
    from openenv_v1.vf04.chat import OpenEnvChatHarness, OpenEnvChatHarnessConfig
    from openenv_v1.vf04.config import OpenEnvConfig, OpenEnvEnvConfig
    from openenv_v1.vf04.env import OpenEnvEnv, OpenEnvError
    from openenv_v1.vf04.taskset import OpenEnvTask, OpenEnvTaskset

# Imported on first use, so `flags` (this line's spelling of the settings) loads
# without verifiers 0.4.
_HOMES = {
    "OpenEnvChatHarness": "openenv_v1.vf04.chat",
    "OpenEnvChatHarnessConfig": "openenv_v1.vf04.chat",
    "OpenEnvConfig": "openenv_v1.vf04.config",
    "OpenEnvData": "openenv_v1.taskset_core",
    "OpenEnvEnv": "openenv_v1.vf04.env",
    "OpenEnvEnvConfig": "openenv_v1.vf04.config",
    "OpenEnvError": "openenv_v1.vf04.env",
    "OpenEnvTask": "openenv_v1.vf04.taskset",
    "OpenEnvTaskset": "openenv_v1.vf04.taskset",
}

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


__getattr__ = lazy_exports(__name__, _HOMES)
