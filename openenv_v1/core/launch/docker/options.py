"""The keys of `provider_kwargs` a launch of an image takes, and what they become
on Docker's command lines: `ImageOptions` (Docker's and Swarm's), `DockerOptions`
(`swarm.options.SwarmOptions` adds Swarm's own), and the limits and user
(`limit_args`, `run_as`) spelt for `docker run` (`RUN_FLAGS`) or `docker service
create` (`SERVICE_FLAGS`).
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
    """Image to run (on a Swarm of several nodes, one every node can pull); unset,
    one built from `project_path`'s Dockerfile (this node only), else the Space's."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose `server/Dockerfile` (else `Dockerfile`) is built, and
    reused while its files are unchanged."""
    build_network: BuildNetwork | None = None
    """Network of the image's build: `default` (RUN steps do not reach this host's
    loopback) or `host` (registries that answer only there); unset,
    `$OPENENV_V1_BUILD_NETWORK`, else `default`."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    user: str = "auto"
    """Who the server runs as: `auto` (the image's own user unless root; else
    65534:65534 with HOME=/tmp, and a Docker container that then exits before it is
    ready runs again as root, with a warning), `root`, or any `--user` value."""
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
    """Read-only root filesystem, a writable tmpfs at /tmp (off by default: the
    non-root user cannot write the image's files anyway; turn it on for envs that
    run model code)."""


class DockerOptions(ImageOptions):
    """The Docker keys of `provider_kwargs`: the image's, and its own."""

    keep_images: int = Field(3, ge=1)
    """Images of this env folder kept after a new one is built (never removed: one
    a container uses)."""
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
    metadata address): it runs on `openenv-v1-egress`, its port published on
    `host`. Off, on the internal `openenv-v1-isolated`, which nothing leaves. No
    container reaches another either way."""
    network: str | None = None
    """An existing Docker network to run on instead, the port published on `host`:
    its own rules decide egress (`egress` does not apply)."""
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
    """`target.provider_kwargs` read as `model` (`launch.options.read_options`), a
    UV launch's options dropped with a warning."""
    return read_options(
        model,
        target.provider_kwargs,
        launcher,
        where,
        because="the image runs its own command",
    )


@dataclass(frozen=True)
class CommandFlags:
    """How `docker run` or `docker service create` spells these options."""

    env: str
    pids: str
    memory: tuple[str, ...]  # `docker run` limits swap too
    cpus: str
    tmp: tuple[str, str]  # the writable /tmp of a read-only root


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
    """`options`' hardening and limits, spelt as `flags`."""
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
    """Who the server of `image` runs as for `user` (`ImageOptions.user`);
    `needs_root`: "auto" runs it as root."""
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
    """What a failure of a server run as `user` adds (a user not root may be why)."""
    if user is None or user == "root":
        return ""
    return (
        f" (it ran as user {user}: if the image needs root, set "
        f"{setting('provider_kwargs.user', 'root')})"
    )
