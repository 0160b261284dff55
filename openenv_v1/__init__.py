"""Run any OpenEnv environment as a verifiers V1 taskset.

    uv run eval openenv-v1 --taskset.env openenv/echo-env
    uv run vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000 -m <model>

verifiers resolves the id to this module: the taskset, its config (subclass it to pin
an env, as `openenv_wordle_v1` does) and the in-process chat harness, of verifiers
0.2 (`openenv_v1.vf02`) or 0.4 (`openenv_v1.vf04`, plus `OpenEnvEnv`), whichever is
installed. The names are imported on first use, so `openenv_v1.core` (and the
`openenv-v1` command) stay quick to load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv_v1.core.light_import import lazy_exports

if TYPE_CHECKING:
    from openenv_v1.taskset_core import OpenEnvData
    from openenv_v1.vf02.config import (
        OpenEnvConfig,
        OpenEnvTaskConfig,
        OpenEnvUserConfig,
    )
    from openenv_v1.vf02.harness import OpenEnvHarness
    from openenv_v1.vf02.state import OpenEnvState
    from openenv_v1.vf02.taskset import OpenEnvTask, OpenEnvTaskset
    from openenv_v1.vf02.user import OpenEnvUser

_HOMES = {
    "OpenEnvConfig": "openenv_v1.vf02.config",
    "OpenEnvTaskConfig": "openenv_v1.vf02.config",
    "OpenEnvUserConfig": "openenv_v1.vf02.config",
    "OpenEnvTask": "openenv_v1.vf02.taskset",
    "OpenEnvTaskset": "openenv_v1.vf02.taskset",
    "OpenEnvData": "openenv_v1.taskset_core",
    "OpenEnvHarness": "openenv_v1.vf02.harness",
    "OpenEnvState": "openenv_v1.vf02.state",
    "OpenEnvUser": "openenv_v1.vf02.user",
}

__all__ = [
    "OpenEnvConfig",
    "OpenEnvData",
    "OpenEnvHarness",
    "OpenEnvState",
    "OpenEnvTask",
    "OpenEnvTaskConfig",
    "OpenEnvTaskset",
    "OpenEnvUser",
    "OpenEnvUserConfig",
]


def verifiers_line() -> str:
    """`vf04` when verifiers >= 0.3 is installed, else `vf02`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(p) for p in version("verifiers").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return "vf02"
    return "vf04" if (major, minor) >= (0, 3) else "vf02"


if verifiers_line() == "vf04":
    # verifiers 0.4 resolves the id to this module and takes the one Taskset, Env
    # and Harness subclass that `__all__` exports.
    _HOMES = {
        name: "openenv_v1.vf04"
        for name in [
            "OpenEnvChatHarness",
            "OpenEnvConfig",
            "OpenEnvData",
            "OpenEnvEnv",
            "OpenEnvEnvConfig",
            "OpenEnvTask",
            "OpenEnvTaskset",
        ]
    }
    __all__ = list(_HOMES)


__getattr__ = lazy_exports(__name__, _HOMES)
