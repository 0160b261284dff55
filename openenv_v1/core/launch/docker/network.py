"""The Docker networks env containers run on: no egress, no traffic between containers.

A container on Docker's default bridge reaches the internet, the cloud metadata
address (169.254.169.254), every other container on the bridge and whatever the host
serves. Env containers run model-written code, so `DockerLaunch` puts them on one of
two bridge networks of this package's, both with inter-container traffic off
(`com.docker.network.bridge.enable_icc=false`, so no container reaches another):

- `openenv-v1-isolated` (the default): `--internal`, so nothing leaves it: no route
  out, no NAT. Docker publishes no port of a container on an internal network, so the
  client reaches the server at the container's address on it (from this host only:
  Docker drops packets forwarded into an internal network from elsewhere);
- `openenv-v1-egress` (`egress = true`): outbound traffic allowed, the port published
  on 127.0.0.1 as on the default bridge.

Both are shared by every eval on the engine (with inter-container traffic off,
sharing lets no container reach another) rather than one per eval: Docker's default
address pools hold about 30 bridge networks, fewer than the user simulators of one
eval with a container each. Each is created when first needed (under a fixed
bridge interface name, `ov1-isolated` / `ov1-egress`, for host firewall rules), and
the reaper tries to remove both when an owner ends (Docker refuses while a container
uses one).

What neither stops: a container reaches the host itself at its network's gateway
address (the host's `INPUT` chain, not Docker's), so host services listening on every
interface answer it; see docs/docker.md for the firewall rule that closes it.

    name = ensure_network(egress=False)   # "openenv-v1-isolated"
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
    """The name of the network for containers with or without egress, created when
    the engine lacks it; `again` asks Docker afresh (another process's reaper may
    have removed it since)."""
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
