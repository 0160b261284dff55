"""The Swarm keys of `provider_kwargs`: the image's (`docker.options.ImageOptions`)
and Swarm's own, read as the Docker launch reads its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from openenv_v1.core.launch.docker.options import ImageOptions, read_image_options
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget


class SwarmOptions(ImageOptions):
    """The Swarm keys of `provider_kwargs`: the image's, and its own."""

    replicas: int = Field(2, ge=1)
    """Tasks the service starts with (more are added while all are at their session
    limit, as shared servers are)."""
    publish: Literal["local", "host", "ingress"] = "local"
    """`local`: nothing published; each task is reached through a gateway container
    on this node published on 127.0.0.1 only. On every interface: `host`, each task
    publishes its own port on its node; `ingress`, one port on every node, the
    routing mesh balancing connections over the tasks (needs IPVS)."""
    egress: bool | None = None
    """Let the tasks open connections out (the internet, the LAN, the cloud metadata
    address). Unset: off with `publish` "local", on with `host` or `ingress` (which
    Swarm publishes only through a network with a way out)."""
    port: int | None = None
    """Ingress mode: the published port; unset, Swarm picks one (30000-32767)."""
    host: str | None = None
    """Address clients reach published ports at; unset, the task's node's address
    (host mode) or 127.0.0.1 (ingress mode, where every node answers)."""
    network: str | None = None
    """Existing network to attach the tasks to; unset, an overlay network of the
    service's own, removed with it."""
    stop_grace_s: float = Field(2.0, ge=0)
    """Seconds a task gets between SIGTERM and SIGKILL when the service goes."""
    service_args: list[str] = Field(default_factory=list)
    """Extra `docker service create` options, placed before the image (e.g.
    `["--constraint", "node.role==worker"]`)."""


def swarm_options(target: EnvTarget) -> SwarmOptions:
    """`provider_kwargs` read as `SwarmOptions` (see `read_image_options`)."""
    return read_image_options(SwarmOptions, target, "Swarm", setting("provider_kwargs"))
