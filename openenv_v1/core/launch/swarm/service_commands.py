"""The `docker` commands a Swarm service is made, scaled and removed with, each with
the failure that names its cause; `SwarmService` decides when. Publishing:
`local`, nothing (each task reached at its address); `host`, each task's port on
its node; `ingress`, the routing mesh.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping

from tenacity import Retrying, retry_if_result, stop_before_delay, wait_fixed

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import docker_cli, run_docker
from openenv_v1.core.launch.docker.image import EnvImage
from openenv_v1.core.launch.docker.options import (
    SERVICE_FLAGS,
    limit_args,
    run_as,
)
from openenv_v1.core.launch.docker.reaper import label_args
from openenv_v1.core.launch.swarm.options import SwarmOptions

__all__ = [
    "check_swarm_active",
    "create_overlay_network",
    "create_service",
    "ingress_port",
    "remove_service",
    "scale_service",
    "service_create_args",
]

logger = logging.getLogger(__name__)


def check_swarm_active() -> None:
    """`EnvFailure` naming how to start a swarm when this engine is in none."""
    result = run_docker("info", "--format", "{{.Swarm.LocalNodeState}}")
    state = result.stdout.strip() or "unknown"
    if result.returncode != 0 or state != "active":
        raise EnvFailure(
            f"Docker Swarm is not active on this engine (state {state}; "
            f"{result.stderr.strip() or 'docker info answered'}): run `docker "
            "swarm init --advertise-addr <this host's address>` (127.0.0.1 for a "
            "one-node swarm), or join a swarm as a manager, or pick another "
            "provider"
        )


def create_overlay_network(network: str, *, egress: bool, env: str) -> None:
    """Create the attachable overlay `network` of a service of the env `env`
    (`--internal` without `egress`), labelled with its owner."""
    argv = ["network", "create", "--driver", "overlay", "--attachable"]
    if not egress:
        argv.append("--internal")
    argv += label_args(docker_cli(), env)
    result = run_docker(*argv, network)
    if result.returncode != 0:
        raise EnvFailure(
            f"cannot create the overlay network {network} for the Swarm service: "
            f"{(result.stderr or result.stdout).strip()}"
        )


def service_create_args(
    name: str,
    options: SwarmOptions,
    image: EnvImage,
    *,
    replicas: int,
    network: str,
    env_name: str,
    env: Mapping[str, str],
) -> tuple[list[str], str | None]:
    """The `docker service create` arguments of service `name` of `image`, its
    variables `env` named (values never on argv); and the user its tasks run as."""
    argv = ["service", "create", "--detach", "--quiet", "--init"]
    argv += ["--name", name, "--replicas", str(replicas)]
    argv += ["--network", network]
    if options.publish == "local":
        # Reached at each task's address: no virtual IP (which needs IPVS).
        argv += ["--endpoint-mode", "dnsrr"]
    elif options.publish == "host":
        argv += ["--endpoint-mode", "dnsrr"]
        argv += ["--publish", f"mode=host,target={options.container_port}"]
    else:
        published = f"published={options.port}," if options.port else ""
        argv += ["--publish", f"{published}target={options.container_port}"]
    argv += label_args(docker_cli(), env_name, ("--label", "--container-label"))
    chosen = run_as(options.user, image.image, SERVICE_FLAGS)
    argv += limit_args(options, SERVICE_FLAGS) + chosen.argv
    argv += ["--stop-grace-period", f"{math.ceil(options.stop_grace_s)}s"]
    if image.source != "image setting":
        argv.append("--no-resolve-image")  # built or named here: no registry
    for key in env:
        argv += [SERVICE_FLAGS.env, key]  # its value: the client's environment
    argv += [*options.service_args, image.image]
    return argv, chosen.user


def create_service(
    argv: list[str], env: Mapping[str, str], image: str, timeout_s: float
) -> str:
    """Run `docker <argv>` (a `service create`, reading `env`); the service's id."""
    result = run_docker(*argv, timeout=timeout_s, env=env)
    if result.returncode != 0:
        raise EnvFailure(
            f"`docker service create ... {image}` failed (exit "
            f"{result.returncode}): {(result.stderr or result.stdout).strip()}"
        )
    return result.stdout.strip().splitlines()[-1]


def ingress_port(service_id: str, name: str | None, container_port: int) -> int:
    """The port the routing mesh publishes the service's `container_port` on."""
    result = run_docker(
        "service", "inspect", "--format", "{{json .Endpoint.Ports}}", service_id
    )
    with contextlib.suppress(ValueError, TypeError):
        for entry in json.loads(result.stdout) or []:
            if entry.get("TargetPort") == container_port:
                return int(entry["PublishedPort"])
    raise EnvFailure(
        f"Swarm service {name} publishes no port for "
        f"{container_port}: {result.stderr.strip() or result.stdout}"
    )


def scale_service(service_id: str, name: str | None, replicas: int) -> None:
    """Ask Swarm for `replicas` tasks of the service."""
    result = run_docker(
        "service", "update", "--detach", "--quiet", "--replicas", str(replicas),
        service_id,
    )  # fmt: skip
    if result.returncode != 0:
        raise EnvFailure(
            f"cannot scale Swarm service {name} to {replicas} "
            f"tasks: {(result.stderr or result.stdout).strip()}"
        )
    logger.info("Swarm service %s scaled to %d tasks", name, replicas)


def remove_service(
    target: str | None, service_id: str | None, network: str | None, grace_s: float
) -> None:
    """Remove the service `target`, wait (up to `grace_s` and 20 s) for its
    containers on this node to go, then remove its own `network` (Docker refuses
    while containers are attached; the owner's reaper retries)."""
    if target is not None:
        run_docker("service", "rm", target, timeout=60)
    deadline = time.monotonic() + grace_s + 20.0

    def until(done: Callable[[], bool]) -> bool:
        """`done()` every 0.3 s until it holds or the deadline passed."""
        return Retrying(
            stop=stop_before_delay(max(0.0, deadline - time.monotonic())),
            wait=wait_fixed(0.3),
            retry=retry_if_result(lambda ok: not ok),
            retry_error_callback=lambda _: False,
        )(done)

    label = f"label=com.docker.swarm.service.id={service_id}"
    if service_id is not None:
        until(lambda: not run_docker("ps", "-aq", "--filter", label).stdout.strip())
    if network is not None and not until(
        lambda: run_docker("network", "rm", network).returncode == 0
    ):
        logger.warning(
            "Swarm network %s is still in use; its owner's reaper removes it", network
        )
