"""The episode account in a rollout trace's `info`, on both verifiers lines."""

from __future__ import annotations

from typing import Any

from openenv_v1.core import EpisodeReport
from openenv_v1.core.setting_names import Surface, render_settings

__all__ = ["publish_account"]


def publish_account(
    info: dict[str, Any], report: EpisodeReport, surface: Surface
) -> None:
    """Write `report` into a trace's `info`: `openenv` (`EpisodeReport.info`, and
    its `error`, if any, with settings spelled as `surface` sets them) and the env's
    own time, `openenv_timing`."""
    account = report.info()
    if report.error is not None:
        account["error"] = render_settings(report.error, surface)
    info["openenv"] = account
    info["openenv_timing"] = report.timing()
