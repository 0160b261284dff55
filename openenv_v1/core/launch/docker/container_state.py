"""What Docker says of an env container (its state, log and how it exited), and its
removal.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Mapping
from typing import Any

from openenv_v1.core.launch.docker.cli import run_docker
from openenv_v1.core.setting_names import setting

__all__ = [
    "LOG_TAIL_LINES",
    "container_log_tail",
    "container_state",
    "exit_message",
    "remove_container",
]

LOG_TAIL_LINES = 40


def container_state(container: str) -> dict[str, Any] | None:
    """Docker's `.State` of `container`; None when Docker cannot say."""
    result = run_docker("inspect", "--format", "{{json .State}}", container)
    if result.returncode != 0:
        return None
    with contextlib.suppress(ValueError):
        return json.loads(result.stdout)
    return None


def container_log_tail(container: str, chars: int | None = None) -> str:
    """The container's last `LOG_TAIL_LINES` log lines, or last `chars` characters."""
    lines = LOG_TAIL_LINES if chars is None else chars  # a line has 1 at least
    result = run_docker("logs", "--tail", str(lines), container)
    text = (result.stdout + result.stderr).strip()
    return text if chars is None else text[-chars:]


def exit_message(
    name: str | None,
    image: str | None,
    state: Mapping[str, Any],
    log_tail: str,
    user_hint: str,
) -> str:
    """What a failure says of container `name` that exited before it was ready: the
    exit code, an out-of-memory kill and the setting to raise, `user_hint`, the log."""
    why = ""
    if state.get("OOMKilled"):
        why = (
            " (killed for exceeding its memory limit: raise "
            f"{setting('provider_kwargs.memory')})"
        )
    return (
        f"container {name} ({image}) exited "
        f"with code {state.get('ExitCode')}{why} before it was ready{user_hint}; "
        f"its log ends with:\n{log_tail}"
    )


def remove_container(target: str, *, started: bool, grace_s: float) -> None:
    """Remove `target` (an id or name): stopped first with `grace_s` when it
    `started`, then `docker rm -f` (a failed `docker run` may leave one created)."""
    if started and grace_s > 0:
        run_docker("stop", "-t", str(math.ceil(grace_s)), target, timeout=grace_s + 30)
    run_docker("rm", "-f", target, timeout=60)
