"""The Docker keys of `provider_kwargs`, read and checked, and the limits they set.

`DockerOptions` is what a Docker launch may be given (image, build, network, user,
limits); `docker_options(target)` reads them from `target.provider_kwargs` with
`read_image_options`, the reader of any launcher that runs an image (Swarm's options
too): `launch.options.read_options` (the env folder's `openenv.yaml` defaults under
what is set, anything unknown or invalid an `EnvFailure` naming it and the known
ones), with the options of a UV launch dropped with a warning. `run_limits` is what
the hardening and limits become on `docker run`.

Imports `build` (the build network's type) and `launch.options`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from openenv_v1.core.launch.docker.build import BuildNetwork
from openenv_v1.core.launch.options import OptionsT, read_options
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

UV_ONLY_OPTIONS = {"app", "workers", "reload", "context_timeout_s", "web_ui"}
"""Options of a UV launch that mean nothing to an image with its own command."""
NOBODY = "65534:65534"
"""The user an image whose own user is root runs as (`user` "auto")."""


class DockerOptions(BaseModel):
    """The Docker keys of `provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    """Image to run (local or from a registry); unset, one is built from
    `project_path`'s Dockerfile, or the Space's image is run."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose `server/Dockerfile` (else `Dockerfile`) is built, as
    `openenv build` builds it, and reused while its files are unchanged."""
    keep_images: int = Field(3, ge=1)
    """Images of this env folder kept after a new one is built (older ones built by
    openenv-v1 are removed, never one a running container uses)."""
    port: int | None = None
    """Host port to publish on (with `egress` or `network`); unset, Docker picks a
    free one."""
    host: str = "127.0.0.1"
    """Host address the container's port is published on, with `egress` or
    `network` (loopback unless set)."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    memory: str | None = "4g"
    """Memory limit (`docker run --memory`, swap included); None for none."""
    pids_limit: int | None = Field(1024, ge=16)
    """Most processes and threads in the container (stops fork bombs); None for none."""
    cpus: float | None = Field(None, gt=0)
    """CPU limit (`docker run --cpus`); unset, none."""
    read_only: bool = False
    """Read-only root filesystem, with a writable tmpfs at /tmp (off by default: the
    non-root default user already cannot write the image's files, and an image that
    needs root mostly needs it to write them; turn it on for envs that run model
    code)."""
    no_new_privileges: bool = True
    """`--security-opt no-new-privileges`: no setuid escalation inside."""
    cap_add: list[str] = Field(default_factory=list)
    """Linux capabilities given back (`--cap-add`, e.g. `["NET_BIND_SERVICE"]`);
    every other one is dropped (`--cap-drop ALL`)."""
    user: str = "auto"
    """Who the server runs as: `auto` (the image's own user when it names one other
    than root; else uid:gid 65534:65534 with HOME=/tmp, and an image whose server
    then exits before it is ready is run again as root, with a warning saying the
    image needs root), `root`, or any `docker run --user` value, used as given."""
    egress: bool = False
    """Let the container open connections out (the internet, the LAN, the cloud
    metadata address). Off: it runs on the internal network `openenv-v1-isolated`,
    which nothing leaves, and the client reaches the server at the container's
    address there. On: it runs on `openenv-v1-egress`, its port published on `host`.
    Either way no container reaches another."""
    network: str | None = None
    """An existing Docker network to run on instead (neither created nor removed;
    the port is published on `host`): its own rules then decide egress and traffic
    between containers, and `egress` does not apply."""
    build_network: BuildNetwork | None = None
    """Network of the image's build: `default` (Docker's build network; RUN steps
    do not reach this host's loopback services) or `host` (where package registries
    answer only from the host's network); unset, `$OPENENV_V1_BUILD_NETWORK`, else
    `default`."""
    docker_run_args: list[str] = Field(default_factory=list)
    """Extra `docker run` options, placed before the image (e.g. `["--shm-size",
    "1g"]`; the network is `egress` or `network`, not a `--network` here)."""


def docker_options(target: EnvTarget) -> DockerOptions:
    """`provider_kwargs` read as `DockerOptions` (see `read_image_options`)."""
    return read_image_options(
        DockerOptions, target, "Docker", setting("provider_kwargs")
    )


def read_image_options(
    model: type[OptionsT], target: EnvTarget, launcher: str, where: str
) -> OptionsT:
    """`target.provider_kwargs` read as the options `model` of a launcher that runs
    an image (Docker, Swarm) by `launch.options.read_options`: options of a UV launch
    are dropped with a warning, anything else unknown or invalid is an `EnvFailure`
    naming it and the known ones."""
    return read_options(
        model,
        target.provider_kwargs,
        launcher,
        where,
        ignore=UV_ONLY_OPTIONS,
        because="the image runs its own command",
    )


def run_limits(options: DockerOptions) -> list[str]:
    """The `docker run` options of `options`' hardening and limits: no capabilities
    but `cap_add`, no new privileges, pids, memory (swap included), cpus, a
    read-only root."""
    argv = ["--cap-drop", "ALL"]
    for capability in options.cap_add:
        argv += ["--cap-add", capability]
    if options.no_new_privileges:
        argv += ["--security-opt", "no-new-privileges"]
    if options.pids_limit is not None:
        argv += ["--pids-limit", str(options.pids_limit)]
    if options.memory:
        argv += ["--memory", options.memory, "--memory-swap", options.memory]
    if options.cpus is not None:
        argv += ["--cpus", str(options.cpus)]
    if options.read_only:
        argv += ["--read-only", "--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777"]
    return argv
