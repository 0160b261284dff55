"""What Docker says of an env container, and its removal.

A `DockerLaunch` asks Docker about its container while it waits for the server and
after: its state (`container_state`: running, exit code, killed for its memory), the
end of its log (`container_log_tail`), and, once it exited before it was ready, what
a failure says of it (`exit_message`: the exit code, an out-of-memory kill and the
setting to raise, the user it ran as, the log's tail). `remove_container` removes it:
stopped first with a grace period, then `docker rm -f`.

    state = container_state(container_id)
    if state is not None and not state.get("Running"):
        raise EnvFailure(exit_message(name, image, state, container_log_tail(cid), ""))

Imports `cli` of `docker/`.
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
    """Docker's `.State` of `container` (`Running`, `ExitCode`, `OOMKilled`, ...);
    None when Docker does not know it or cannot say."""
    result = run_docker("inspect", "--format", "{{json .State}}", container)
    if result.returncode != 0:
        return None
    with contextlib.suppress(ValueError):
        return json.loads(result.stdout)
    return None


def container_log_tail(container: str, chars: int | None = None) -> str:
    """The end of the container's log: its last `LOG_TAIL_LINES` lines, or (as
    UV's `log_tail`, which `check` calls) its last `chars` characters."""
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
    """What a failure says of container `name` of `image` that exited before its
    server was ready (`state`: its `.State`): the exit code, an out-of-memory kill
    and the setting to raise, `user_hint` (`options.root_hint`) and `log_tail`."""
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
    """Remove `target` (an id or name): stopped first (SIGTERM, SIGKILL after
    `grace_s`) when it `started` and `grace_s` > 0, then `docker rm -f` (a `docker
    run` that failed may have left it created, unstarted)."""
    if started and grace_s > 0:
        run_docker("stop", "-t", str(math.ceil(grace_s)), target, timeout=grace_s + 30)
    run_docker("rm", "-f", target, timeout=60)
