"""How verifiers 0.4's `vf-eval` sets the settings the core names
(`core.setting_names`): every setting is the taskset's own, under `--env.taskset.`
(in a TOML config, the same path: `[env.taskset] launch_timeout_s`). No verifiers
import (`openenv_v1.vf04` imports its modules on first use), so the tests of either
line render with it.

    render_settings(str(failure), VF_EVAL_FLAGS)  # "`--env.taskset.launch-timeout-s`"
"""

from __future__ import annotations

from openenv_v1.core.setting_names import Surface

__all__ = ["VF_EVAL_FLAGS", "VfEvalFlags"]


class VfEvalFlags(Surface):
    """verifiers 0.4's `vf-eval` command line."""

    def flag(self, name: str) -> str:
        return f"--env.taskset.{name.replace('_', '-')}"


VF_EVAL_FLAGS = VfEvalFlags()
"""The surface the 0.4 binding renders the settings its failures name with."""
