"""The keys of `provider_kwargs` a launch of an image takes, and what they become
on Docker's command lines.

`ImageOptions` declares, once, what every launcher that runs an image (Docker,
Swarm) takes: the image, its build, the server's port and variables, its user,
capabilities and limits; `DockerOptions` and `swarm.options.SwarmOptions` add their
own. `read_image_options` reads either with `launch.options.read_options`, the
options of a UV launch dropped with a warning. `limit_args` and `run_as` are the
limits and the user, spelt for `docker run` (`RUN_FLAGS`) or `docker service
create` (`SERVICE_FLAGS`); `root_hint` is what a failure says of that user.

    options = docker_options(target)
    argv = limit_args(options, RUN_FLAGS) + run_as(options.user, image, RUN_FLAGS).argv

Imports `build` (the build network's type), `image` (the image's own user) and
`launch.options`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from openenv_v1.core.launch.docker.build import BuildNetwork
from openenv_v1.core.launch.docker.image import image_user
from openenv_v1.core.launch.options import OptionsT, read_options
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

NOBODY = "65534:65534"
"""The user an image whose own user is root runs as (`user` "auto")."""
_ROOT_USERS = {"", "root", "0"}


class ImageOptions(BaseModel):
    """The keys of `provider_kwargs` every launch of an image takes (Docker, Swarm)."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    """Image to run (local or from a registry; on a Swarm of more than one node, one
    in a registry every node can pull from); unset, one is built from
    `project_path`'s Dockerfile (on this node only), or the Space's image is run."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose `server/Dockerfile` (else `Dockerfile`) is built, as
    `openenv build` builds it, and reused while its files are unchanged."""
    build_network: BuildNetwork | None = None
    """Network of the image's build: `default` (Docker's build network; RUN steps
    do not reach this host's loopback services) or `host` (where package registries
    answer only from the host's network); unset, `$OPENENV_V1_BUILD_NETWORK`, else
    `default`."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    user: str = "auto"
    """Who the server runs as: `auto` (the image's own user when it names one other
    than root; else uid:gid 65534:65534 with HOME=/tmp: a Docker container whose
    server then exits before it is ready is run again as root, with a warning saying
    the image needs root; a Swarm task that then fails says to set `root`), `root`,
    or any `--user` value, used as given."""
    cap_add: list[str] = Field(default_factory=list)
    """Linux capabilities given back (`--cap-add`, e.g. `["NET_BIND_SERVICE"]`);
    every other one is dropped (`--cap-drop ALL`)."""
    memory: str | None = "4g"
    """Memory limit (of each task on Swarm); None for none. `docker run --memory`
    limits swap to it too; Swarm's `--limit-memory` sets no swap limit."""
    pids_limit: int | None = Field(1024, ge=16)
    """Most processes and threads in the container (stops fork bombs); None for none."""
    cpus: float | None = Field(None, gt=0)
    """CPU limit (`docker run --cpus`, Swarm's `--limit-cpu`); unset, none."""
    read_only: bool = False
    """Read-only root filesystem, with a writable tmpfs at /tmp (off by default: the
    non-root default user already cannot write the image's files, and an image that
    needs root mostly needs it to write them; turn it on for envs that run model
    code)."""


class DockerOptions(ImageOptions):
    """The Docker keys of `provider_kwargs`: the image's, and its own."""

    keep_images: int = Field(3, ge=1)
    """Images of this env folder kept after a new one is built (older ones built by
    openenv-v1 are removed, never one a running container uses)."""
    port: int | None = None
    """Host port to publish on (with `egress` or `network`); unset, Docker picks a
    free one."""
    host: str = "127.0.0.1"
    """Host address the container's port is published on, with `egress` or
    `network` (loopback unless set)."""
    no_new_privileges: bool = True
    """`--security-opt no-new-privileges`: no setuid escalation inside."""
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
        because="the image runs its own command",
    )


@dataclass(frozen=True)
class CommandFlags:
    """How one `docker` command spells these options (`docker run` and `docker
    service create` differ)."""

    env: str
    """The flag of one server variable."""
    pids: str
    memory: tuple[str, ...]
    """The flags the memory limit is given to (`docker run` limits swap too)."""
    cpus: str
    tmp: tuple[str, str]
    """The writable tmpfs at /tmp of a read-only root."""


RUN_FLAGS = CommandFlags(
    "-e",
    "--pids-limit",
    ("--memory", "--memory-swap"),
    "--cpus",
    ("--tmpfs", "/tmp:rw,nosuid,nodev,mode=1777"),
)
SERVICE_FLAGS = CommandFlags(
    "--env",
    "--limit-pids",
    ("--limit-memory",),
    "--limit-cpu",
    ("--mount", "type=tmpfs,destination=/tmp"),
)


def limit_args(
    options: ImageOptions, flags: CommandFlags, *, no_new_privileges: bool = False
) -> list[str]:
    """The options of `options`' hardening and limits, spelt as `flags`: no
    capabilities but `cap_add`, no new privileges if asked (`docker run` only),
    pids, memory, cpus, a read-only root."""
    argv = ["--cap-drop", "ALL"]
    for capability in options.cap_add:
        argv += ["--cap-add", capability]
    if no_new_privileges:
        argv += ["--security-opt", "no-new-privileges"]
    if options.pids_limit is not None:
        argv += [flags.pids, str(options.pids_limit)]
    if options.memory:
        for flag in flags.memory:
            argv += [flag, options.memory]
    if options.cpus is not None:
        argv += [flags.cpus, str(options.cpus)]
    if options.read_only:
        argv += ["--read-only", *flags.tmp]
    return argv


@dataclass(frozen=True)
class RunAs:
    """Who a server runs as, by the `user` option."""

    user: str | None
    """`root`, the `--user` value given, `NOBODY`, or None for the image's own."""
    argv: list[str]
    """The options that say so (`--user`, and `HOME` for `NOBODY`)."""
    auto: bool = False
    """`NOBODY` chosen by `user` "auto" (the image's own user is root)."""


def run_as(
    user: str, image: str, flags: CommandFlags, *, needs_root: bool = False
) -> RunAs:
    """Who the server of `image` runs as for the `user` option (see
    `ImageOptions.user`), its options spelt as `flags`; `needs_root`: "auto" runs
    it as root (it was seen to exit as `NOBODY`)."""
    if user == "root":
        return RunAs("root", ["--user", "0:0"])
    if user != "auto":
        return RunAs(user, ["--user", user])
    if needs_root:
        return RunAs("root", [])
    if image_user(image).partition(":")[0] not in _ROOT_USERS:
        return RunAs(None, [])  # the image names a user of its own: Docker runs it
    return RunAs(NOBODY, ["--user", NOBODY, flags.env, "HOME=/tmp"], auto=True)


def root_hint(user: str | None) -> str:
    """What the failure of a server that ended as `user` (`RunAs.user`) adds: a
    user other than root may be why."""
    if user is None or user == "root":
        return ""
    return (
        f" (it ran as user {user}: if the image needs root, set "
        f"{setting('provider_kwargs.user', 'root')})"
    )
