"""The Docker networks env containers run on: no egress, no traffic between containers.

Docker's default bridge reaches the internet, the cloud metadata address, every
other container and the host's services; env containers run model-written code. So
they run on one of two bridge networks shared by every eval on the engine (Docker's
address pools hold only about 30), both with inter-container traffic off
(`enable_icc=false`): `openenv-v1-isolated` (the default, `--internal`: nothing leaves
it, no port is published, the client reaches the container's address from this host)
or `openenv-v1-egress` (`egress = true`: out allowed, the port published on
127.0.0.1). Each is created when first needed, under a fixed bridge name for host
firewall rules (`ov1-isolated`, `ov1-egress`); reapers remove them when idle.
Neither stops a container from reaching the host at its gateway address
(docs/docker.md has the firewall rule).
"""

from __future__ import annotations

import threading

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import run_docker
from openenv_v1.core.launch.docker.reaper import MANAGED_LABEL, SHARED_NETWORKS
from openenv_v1.core.setting_names import setting

ISOLATED, EGRESS = SHARED_NETWORKS
_BRIDGES = {ISOLATED: "ov1-isolated", EGRESS: "ov1-egress"}
_lock = threading.Lock()
_ensured: set[str] = set()


def network_name(egress: bool) -> str:
    return EGRESS if egress else ISOLATED


def ensure_network(egress: bool, *, again: bool = False) -> str:
    """The network for containers with or without egress, created when the engine
    lacks it; `again` asks Docker afresh (a reaper may have removed it)."""
    name = network_name(egress)
    with _lock:
        if name in _ensured and not again:
            return name
        if run_docker("network", "inspect", name).returncode != 0:
            _create(name, egress)
        _ensured.add(name)
    return name


def forget(name: str) -> None:
    """Ask Docker again next time (a `docker run` found the network gone)."""
    with _lock:
        _ensured.discard(name)


def _create(name: str, egress: bool) -> None:
    argv = ["network", "create", "--driver", "bridge", "--label", f"{MANAGED_LABEL}=1"]
    argv += ["--opt", "com.docker.network.bridge.enable_icc=false"]
    argv += ["--opt", f"com.docker.network.bridge.name={_BRIDGES[name]}"]
    if not egress:
        argv.append("--internal")
    result = run_docker(*argv, name)
    if result.returncode == 0:
        return
    if run_docker("network", "inspect", name).returncode == 0:
        return  # another process created it meanwhile
    raise EnvFailure(
        f"cannot create the Docker network {name} for env containers: "
        f"{(result.stderr or result.stdout).strip()} (or set "
        f"{setting('provider_kwargs.network')} to an existing network)"
    )


def address_on(container: str, network: str) -> str | None:
    """The container's IPv4 address on `network`, or None."""
    result = run_docker(
        "inspect",
        "--format",
        f'{{{{with index .NetworkSettings.Networks "{network}"}}}}'
        "{{.IPAddress}}{{end}}",
        container,
    )
    address = result.stdout.strip()
    return address if result.returncode == 0 and address else None
