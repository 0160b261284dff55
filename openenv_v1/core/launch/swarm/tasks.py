"""A Swarm service's tasks as Docker reports them (`docker service ps`, `docker
inspect --type task`): state, the state Swarm wants, node, published port, and the
address on the service's network that a gateway forwards to.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openenv_v1.core.launch.docker.cli import run_docker

if TYPE_CHECKING:
    from openenv_v1.core.launch.swarm.options import SwarmOptions

# Task states (Swarm's) of a task that is gone or will never run.
ENDED = {"complete", "shutdown", "failed", "rejected", "remove", "orphaned"}


@dataclass(frozen=True)
class SwarmTask:
    """One task of a Swarm service, as `docker inspect` last said."""

    id: str
    state: str
    desired: str
    node: str
    port: int | None
    error: str
    address: str | None = None
    """Its IPv4 address on the service's network (what a gateway forwards to)."""


def live(task: SwarmTask) -> bool:
    """Swarm wants the task running and it has not ended (it may still start)."""
    return task.desired == "running" and task.state not in ENDED


def read_tasks(
    service_id: str | None, network: str | None, options: SwarmOptions
) -> dict[str, SwarmTask]:
    """The tasks of service `service_id` ({} when there are none to read)."""
    if service_id is None:
        return {}
    listed = run_docker("service", "ps", "--no-trunc", "-q", service_id)
    ids = listed.stdout.split()
    if listed.returncode != 0 or not ids:
        return {}
    result = run_docker("inspect", "--type", "task", *ids)
    try:
        raw = json.loads(result.stdout or "[]")
    except ValueError:
        return {}
    tasks: dict[str, SwarmTask] = {}
    for entry in raw:
        status = entry.get("Status") or {}
        task_id = entry.get("ID", "")
        tasks[task_id] = SwarmTask(
            id=task_id,
            state=status.get("State", ""),
            desired=entry.get("DesiredState", ""),
            node=entry.get("NodeID", ""),
            port=task_port(status, options),
            error=status.get("Err", ""),
            address=task_address(entry, network),
        )
    return tasks


def task_address(entry: Mapping[str, Any], network: str | None) -> str | None:
    """The task's IPv4 address on the service's network, once Swarm gave it."""
    for attachment in entry.get("NetworksAttachments") or []:
        spec = attachment.get("Network") or {}
        names = {(spec.get("Spec") or {}).get("Name"), spec.get("ID")}
        if network in names:
            for address in attachment.get("Addresses") or []:
                return str(address).partition("/")[0] or None
    return None


def task_port(status: Mapping[str, Any], options: SwarmOptions) -> int | None:
    """The task's published port: from its status once it runs, else from its
    container (still starting, on this node)."""
    target = options.container_port
    for entry in (status.get("PortStatus") or {}).get("Ports") or []:
        if entry.get("TargetPort") == target and entry.get("PublishedPort"):
            return int(entry["PublishedPort"])
    container = (status.get("ContainerStatus") or {}).get("ContainerID")
    if not container or options.publish != "host":
        return None
    result = run_docker(
        "inspect", "--format", "{{json .NetworkSettings.Ports}}", container
    )
    with contextlib.suppress(ValueError, TypeError, KeyError):
        for binding in json.loads(result.stdout)[f"{target}/tcp"] or []:
            if binding.get("HostPort"):
                return int(binding["HostPort"])
    return None


def summary(tasks: Mapping[str, SwarmTask]) -> str:
    """The tasks' states (and errors) in a line, for a failure message."""
    states = [
        f"{t.id[:12]} {t.state}" + (f" ({t.error})" if t.error else "")
        for t in tasks.values()
    ]
    return ", ".join(states) or "none yet"
