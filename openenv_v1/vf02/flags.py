"""How verifiers 0.2's `eval` sets the settings the core names (`core.setting_names`):
the taskset's own settings under `--taskset.`, the episode settings
(`openenv_v1.settings.EpisodeSettings`, the user simulator's) under
`--taskset.task.user.`; in a TOML config, the same path
(`[taskset.task.user] launch_timeout_s`). No verifiers import: the user simulator
renders its failures with it, and so do the tests of either line.

    render_settings(str(failure), EVAL_FLAGS)  # "`--taskset.task.user.launch-timeout-s`"
"""

from __future__ import annotations

from openenv_v1.core.setting_names import Surface
from openenv_v1.settings import EpisodeSettings

__all__ = ["EVAL_FLAGS", "EvalFlags"]

_EPISODE = frozenset(EpisodeSettings.model_fields)


class EvalFlags(Surface):
    """verifiers 0.2's `eval` command line."""

    def flag(self, name: str) -> str:
        under = "task.user." if name.partition(".")[0] in _EPISODE else ""
        return f"--taskset.{under}{name.replace('_', '-')}"


EVAL_FLAGS = EvalFlags()
"""The surface the 0.2 binding renders the settings its failures name with."""
