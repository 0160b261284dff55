"""The Swarm keys of `provider_kwargs`, read and checked, and the limits they set.

`SwarmOptions` is what a Swarm launch may be given (image, publishing, egress,
replicas, user, limits); `swarm_options(target)` reads them as the Docker launch
reads its own (`docker.options.read_image_options`: the env folder's `openenv.yaml`
defaults under what is set, UV options dropped with a warning, anything else unknown
an `EnvFailure`). `service_limits` is what the hardening and limits become on
`docker service create` (Swarm 20.10 has no swap limit and no `no-new-privileges`).

Imports `docker.build` (the build network's type) and `docker.options`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv_v1.core.launch.docker.build import BuildNetwork
from openenv_v1.core.launch.docker.options import read_image_options
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget


class SwarmOptions(BaseModel):
    """The Swarm keys of `provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    """Image to run; on a cluster of more than one node it must be in a registry
    every node can pull from. Unset, one is built from `project_path` (this node
    only), or the Space's image is run."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose Dockerfile is built, as for the Docker launch."""
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
    cap_add: list[str] = Field(default_factory=list)
    """Linux capabilities given back (`--cap-add`); every other one is dropped."""
    user: str = "auto"
    """Who the server runs as: `auto` (the image's own user when it names one other
    than root, else uid:gid 65534:65534 with HOME=/tmp; a task that then fails says
    to set `root`), `root`, or any `--user` value, used as given."""
    build_network: BuildNetwork | None = None
    """Network of the image's build, as for the Docker launch."""
    port: int | None = None
    """Ingress mode: the published port; unset, Swarm picks one (30000-32767)."""
    host: str | None = None
    """Address clients reach published ports at; unset, the task's node's address
    (host mode) or 127.0.0.1 (ingress mode, where every node answers)."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    memory: str | None = "4g"
    """Memory limit of each task (`--limit-memory`; Swarm sets no swap limit)."""
    pids_limit: int | None = Field(1024, ge=16)
    """Most processes and threads in each task (`--limit-pids`)."""
    cpus: float | None = Field(None, gt=0)
    """CPU limit of each task (`--limit-cpu`); unset, none."""
    read_only: bool = False
    """Read-only root filesystem, with a tmpfs at /tmp."""
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


def service_limits(options: SwarmOptions) -> list[str]:
    """The `docker service create` options of `options`' hardening and limits:
    no capabilities but `cap_add`, pids, memory, cpus, a read-only root."""
    argv = ["--cap-drop", "ALL"]
    for capability in options.cap_add:
        argv += ["--cap-add", capability]
    if options.pids_limit is not None:
        argv += ["--limit-pids", str(options.pids_limit)]
    if options.memory:
        argv += ["--limit-memory", options.memory]
    if options.cpus is not None:
        argv += ["--limit-cpu", str(options.cpus)]
    if options.read_only:
        argv += ["--read-only", "--mount", "type=tmpfs,destination=/tmp"]
    return argv
