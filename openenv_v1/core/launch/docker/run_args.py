"""The `docker run` of an env container, checked: its network (`network` as given,
else the shared one, `network.ensure_network`; never one in `docker_run_args`), its
port (published on `host` only where the network lets the server out), its
hardening (the owner's labels, `options.limit_args`, `options.run_as`) and its
variables by name only (`-e NAME`, the value in the client's environment), so values
never show in a command line.

    run = container_run("org/maze", options, image, secret_env={}, needs_root=False)
    run_docker(*run.argv, env=run.env)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import docker_cli
from openenv_v1.core.launch.docker.image import name_for
from openenv_v1.core.launch.docker.network import ensure_network
from openenv_v1.core.launch.docker.options import (
    RUN_FLAGS,
    DockerOptions,
    limit_args,
    run_as,
)
from openenv_v1.core.launch.docker.reaper import label_args
from openenv_v1.core.setting_names import setting

__all__ = ["ContainerRun", "container_network", "container_run"]


@dataclass(frozen=True)
class ContainerRun:
    """One `docker run` of an env container, as `container_run` made it."""

    argv: list[str]
    """The arguments after `docker`, the image last."""
    env: dict[str, str]
    """The server's variables, which `argv` names (`-e NAME`) and `docker run`
    reads from its own environment."""
    name: str
    network: str
    publish: bool
    """The port is published (else reached at the container's address)."""
    user: str | None
    """The user it runs as (`--user`), or None for the image's own."""
    auto_user: bool
    """`user` "auto" chose uid 65534 (the image's own user is root)."""


def container_run(
    env_name: str,
    options: DockerOptions,
    image: str,
    *,
    secret_env: Mapping[str, str],
    needs_root: bool,
) -> ContainerRun:
    """The `docker run` of a container of `image` for the env `env_name`;
    `needs_root`: `user` "auto" runs it as root. `EnvFailure` naming the setting
    for a `port` nothing publishes, or a network set in `docker_run_args`."""
    env = {**options.env_vars, **secret_env}
    publish = options.egress or options.network is not None
    if options.port and not publish:
        raise EnvFailure(
            f"{setting('provider_kwargs.port')} publishes the server on the host, "
            "and the isolated network publishes nothing: set "
            f"{setting('provider_kwargs.egress', True)} (or "
            f"{setting('provider_kwargs.network')}) to publish it, or drop port"
        )
    network = container_network(options)
    name = name_for(image)
    argv = ["run", "-d", "--init", "--name", name, "--network", network]
    if publish:
        bind = f"{options.host}:{options.port or ''}:{options.container_port}"
        argv += ["-p", bind]
    argv += label_args(docker_cli(), env_name)
    argv += limit_args(options, RUN_FLAGS, no_new_privileges=options.no_new_privileges)
    chosen = run_as(options.user, image, RUN_FLAGS, needs_root=needs_root)
    argv += chosen.argv
    for key in env:
        argv += [RUN_FLAGS.env, key]  # its value: the client's environment
    argv += [*options.docker_run_args, image]
    return ContainerRun(
        argv, env, name, network, publish, chosen.user, auto_user=chosen.auto
    )


def container_network(options: DockerOptions) -> str:
    """`network` as given, else the shared one with or without egress."""
    for arg in options.docker_run_args:
        if arg in {"--network", "--net"} or arg.startswith(("--network=", "--net=")):
            raise EnvFailure(
                f"{setting('provider_kwargs.docker_run_args')} sets the network: "
                f"use {setting('provider_kwargs.network')} (an existing network) "
                f"or {setting('provider_kwargs.egress', True)} instead"
            )
    if options.network is not None:
        return options.network
    return ensure_network(egress=options.egress)
