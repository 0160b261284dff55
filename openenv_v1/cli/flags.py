"""How `openenv-v1 check` sets the settings the core names (`core.setting_names`): its
own flags (`--launch-timeout`, `--app`, ...), a `provider_kwargs` key without a flag
of its own as the `--provider-kwargs` JSON that sets it, and a setting it has no flag
for (`check` runs no rollout: `episode_timeout_s`, `max_servers`; `env` is its
`ENV_ID` argument) as the token writes it (`max_servers = 1`).

    render_settings(str(failure), CHECK_FLAGS)  # "raise `--launch-timeout` if ..."
"""

from __future__ import annotations

import json
from typing import Any

from openenv_v1.core.setting_names import Surface

__all__ = ["CHECK_FLAGS", "CheckFlags"]

# Each setting's flag in `check` (a setting not here has none).
_FLAGS = {
    "provider_kwargs": "--provider-kwargs",
    "forward_env": "--forward-env",
    "server_web_ui": "--web-ui",
    "launch_timeout_s": "--launch-timeout",
    "reset_timeout_s": "--timeout",
    "step_timeout_s": "--timeout",
    "base_url": "--base-url",
    "provider": "--provider",
    "use_docker": "--use-docker",
}
# `provider_kwargs` keys `check` has a flag for, and its flags that take no value.
_KEYS = {"app": "--app", "project_path": "--project-path"}
_SWITCHES = {"--web-ui", "--use-docker"}


class CheckFlags(Surface):
    """`openenv-v1 check`'s command line."""

    def flag(self, name: str) -> str:
        base, _, key = name.partition(".")
        if not key:
            return _FLAGS.get(base, base)
        return _KEYS.get(key) or f"--provider-kwargs '{{\"{key}\": ...}}'"

    def flag_given(self, name: str, value: Any) -> str:
        key = name.partition(".")[2]
        if key and key not in _KEYS:
            return f"--provider-kwargs '{json.dumps({key: value})}'"
        flag = self.flag(name)
        if flag == name:  # no flag: as the token writes it
            return f"{name} = {json.dumps(value)}"
        if value is True and flag in _SWITCHES:
            return flag
        return super().flag_given(name, value)


CHECK_FLAGS = CheckFlags()
"""The surface `check` renders the settings its failures name with."""
