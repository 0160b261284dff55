"""The Swarm keys of `provider_kwargs`, read and checked.

`SwarmOptions` is what a Swarm launch may be given: the keys of every launch of an
image (`docker.options.ImageOptions`: image, build, user, limits) and Swarm's own
(replicas, publishing, egress, network, stop grace, `docker service create`
options); `swarm_options(target)` reads them as the Docker launch reads its own
(`docker.options.read_image_options`: the env folder's `openenv.yaml` defaults under
what is set, UV options dropped with a warning, anything else unknown an
`EnvFailure`). The hardening and limits become `docker service create` options by
`docker.options.limit_args(options, SERVICE_FLAGS)` (Swarm 20.10 has no swap limit
and no `no-new-privileges`).

Imports `docker.options`.
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
    """`local`: nothing published; each task the pool uses is reached through a
    gateway container on this node, published on 127.0.0.1 only, over the service's
    own network. Opt-in, on every interface: `host`, each task publishes its own port
    on its node; `ingress`, one port on every node, Swarm's routing mesh balancing
    connections over the tasks (needs IPVS in the kernel). Except in ingress mode
    sessions are spread over the tasks by the pool."""
    egress: bool | None = None
    """Let the tasks open connections out (the internet, the LAN, the cloud metadata
    address). Unset: off with `publish` "local" (the service's overlay network is
    internal), on with `host` or `ingress`, which Swarm publishes only through a
    network with a way out (so egress false with them is an error)."""
    port: int | None = None
    """Ingress mode: the published port; unset, Swarm picks one (30000-32767)."""
    host: str | None = None
    """Address clients reach published ports at; unset, the task's node's address
    (host mode) or 127.0.0.1 (ingress mode, where every node answers)."""
    network: str | None = None
    """Existing network to attach the tasks to (neither created nor removed); unset,
    an overlay network of the service's own, removed with it."""
    stop_grace_s: float = Field(2.0, ge=0)
    """Seconds a task gets between SIGTERM and SIGKILL when the service goes."""
    service_args: list[str] = Field(default_factory=list)
    """Extra `docker service create` options, placed before the image (e.g.
    `["--constraint", "node.role==worker"]`)."""


def swarm_options(target: EnvTarget) -> SwarmOptions:
    """`provider_kwargs` read as `SwarmOptions` (see `read_image_options`)."""
    return read_image_options(SwarmOptions, target, "Swarm", setting("provider_kwargs"))
