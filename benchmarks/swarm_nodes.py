"""A multi-node Docker Swarm on one machine, as SPEC §9 describes it, and nothing of
it left afterwards (`benchmarks/swarm_node_cut.py` runs on it).

Every node, the manager included, is a `dockerd` of its own in a network namespace
of its own (`oev1nc-<node>`; its UTS namespace names it), with its own data root,
exec root, socket and containerd (all on a tmpfs at `STATE`), and its containers under the cgroup parent
`oev1nc-<node>`. The namespaces hang on a host bridge (`oev1nc0`, 10.213.7.0/24;
the host is .1) by veth pairs, with one `FORWARD` rule so the bridge passes traffic
between them (the host engine's policy is DROP). The manager is `docker swarm init`ed
on its bridge address and the workers join it; images reach every engine by `docker
save | docker load`. This machine's own engine is never touched but for the `save`.

    with swarm_nodes(["w1", "w2"], images=[IMAGE]) as manager_host:
        # DOCKER_HOST=manager_host reaches the manager
        cut_off("w1")

`cleanup()` removes every namespace, bridge, rule, engine (its processes, its
containers' processes, its mounts) and folder of such a swarm: at exit, on error or
SIGINT, and at the next start after a SIGKILL. Needs root.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

PREFIX = "oev1nc"
BRIDGE = f"{PREFIX}0"
SUBNET = "10.213.7"
STATE = Path(f"/var/lib/{PREFIX}")
"""Data roots, exec roots, sockets, pid files and logs of the nodes' engines, on a
tmpfs of its own (6 GB at most: the images loaded; quick to write and to drop)."""
RULE = ["FORWARD", "-i", BRIDGE, "-o", BRIDGE, "-j", "ACCEPT"]
MANAGER = "mgr"
DOCKER = "/usr/bin/docker"

__all__ = [
    "MANAGER",
    "cleanup",
    "cut_off",
    "node_address",
    "node_docker",
    "swarm_nodes",
]


def sh(*argv: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run a command, its output captured; `check`: raise with its stderr on failure."""
    result = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")
    return result


def node_address(node: str, nodes: list[str]) -> str:
    return f"{SUBNET}.{11 + [MANAGER, *nodes].index(node)}"


def socket_of(node: str) -> str:
    return f"unix://{STATE / node / 'docker.sock'}"


def node_docker(node: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`docker <args>` against `node`'s engine."""
    return sh(DOCKER, "-H", socket_of(node), *args, **kwargs)


def _host_end(node: str) -> str:
    return f"{PREFIX}-{node}h"


def _add_node_network(node: str, address: str) -> None:
    """The node's namespace, on the bridge at `address` by a veth pair."""
    ns, host, inner = f"{PREFIX}-{node}", _host_end(node), f"{PREFIX}-{node}n"
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", host, "type", "veth", "peer", "name", inner)
    sh("ip", "link", "set", inner, "netns", ns)
    sh("ip", "link", "set", host, "master", BRIDGE, "up")
    inside = ("ip", "netns", "exec", ns, "ip")
    sh(*inside, "link", "set", "lo", "up")
    sh(*inside, "link", "set", inner, "name", "eth0")
    sh(*inside, "addr", "add", f"{address}/24", "dev", "eth0")
    sh(*inside, "link", "set", "eth0", "up")
    sh(*inside, "route", "add", "default", "via", f"{SUBNET}.1")


def _start_engine(node: str) -> None:
    """`dockerd` in the node's namespace (`nsenter`, not `ip netns exec`, which
    remounts /sys: dockerd then finds no devices cgroup), until it answers."""
    folder = STATE / node
    (folder / "exec").mkdir(parents=True)
    (folder / "daemon.json").write_text("{}\n")
    engine = [
        *("dockerd", "--config-file", str(folder / "daemon.json")),
        *("--data-root", str(folder / "data"), "--exec-root", str(folder / "exec")),
        *("--pidfile", str(folder / "dockerd.pid"), "-H", socket_of(node)),
        *("--containerd-namespace", f"{PREFIX}-{node}"),
        *("--containerd-plugins-namespace", f"{PREFIX}-{node}-plugins"),
        *("--cgroup-parent", f"{PREFIX}-{node}"),
    ]
    script = f'hostname {PREFIX}-{node}; exec "$@"'
    with (folder / "dockerd.log").open("w") as log:
        subprocess.Popen(
            ["nsenter", f"--net=/var/run/netns/{PREFIX}-{node}", "unshare", "--uts"]
            + ["sh", "-c", script, "sh", *engine],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    while node_docker(node, "info", check=False).returncode != 0:
        if time.monotonic() > deadline:
            tail = (folder / "dockerd.log").read_text()[-1500:]
            raise RuntimeError(f"the engine of node {node} did not start:\n{tail}")
        time.sleep(0.5)


def _form_swarm(nodes: list[str]) -> None:
    """`swarm init` on the manager (workers only run tasks), the workers joined."""
    address = node_address(MANAGER, nodes)
    node_docker(MANAGER, "swarm", "init", "--advertise-addr", address)
    node_docker(MANAGER, "node", "update", "--availability", "drain", f"{PREFIX}-mgr")
    token = node_docker(MANAGER, "swarm", "join-token", "-q", "worker").stdout.strip()
    for node in nodes:
        node_docker(node, "swarm", "join", "--token", token, f"{address}:2377")
    wait_ready(len(nodes) + 1, timeout_s=120)


def wait_ready(count: int, timeout_s: float) -> None:
    """Until `count` nodes are Ready, as the manager says."""
    deadline = time.monotonic() + timeout_s
    while True:
        listed = node_docker(MANAGER, "node", "ls", "--format", "{{.Status}}")
        if listed.stdout.split().count("Ready") >= count:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"nodes not all Ready: {listed.stdout.split()}")
        time.sleep(1)


def _load_images(nodes: list[str], images: list[str]) -> None:
    """Each image from this machine's engine into every node's (nothing is pulled)."""
    for node in [MANAGER, *nodes]:
        for image in images:
            save = subprocess.Popen([DOCKER, "save", image], stdout=subprocess.PIPE)
            node_docker(node, "load", "-q", stdin=save.stdout)
            if save.wait() != 0:
                raise RuntimeError(f"docker save {image} failed")


def cut_off(node: str) -> None:
    """Cut `node` off the others and this host: the host end of its veth down."""
    sh("ip", "link", "set", _host_end(node), "down")


def reconnect(node: str) -> None:
    sh("ip", "link", "set", _host_end(node), "up")


@contextlib.contextmanager
def swarm_nodes(nodes: list[str], images: list[str]) -> Iterator[str]:
    """A swarm of a manager and `nodes` (workers) with `images` on every engine;
    yields the manager's `DOCKER_HOST`. Everything is removed at exit, also on
    SIGINT or SIGTERM (raised here as `KeyboardInterrupt`)."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    cleanup()
    try:
        STATE.mkdir(parents=True)
        sh("mount", "-t", "tmpfs", "-o", "size=6g,mode=0700", PREFIX, str(STATE))
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{SUBNET}.1/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        sh("iptables", "-I", *RULE)
        for node in [MANAGER, *nodes]:
            _add_node_network(node, node_address(node, nodes))
            _start_engine(node)
        _form_swarm(nodes)
        _load_images(nodes, images)
        yield socket_of(MANAGER)
    finally:
        cleanup()
        signal.signal(signal.SIGTERM, previous)


def cleanup() -> None:
    """Remove what a swarm of `swarm_nodes` left, whatever state it is in: engines
    stopped (SIGTERM, then SIGKILL of every process in the node namespaces and of
    their containers' processes), mounts under `STATE` undone, `STATE` removed, the
    namespaces, the bridge, the veths and the FORWARD rule deleted."""
    namespaces = [
        line.split()[0]
        for line in sh("ip", "netns", "list").stdout.splitlines()
        if line.startswith(f"{PREFIX}-")
    ]
    _stop_engines(namespaces)
    for ns in namespaces:
        _kill(_netns_pids(ns))
    _kill_containers()
    _unmount_under(STATE)
    if STATE.exists():
        sh("rm", "-rf", "--one-file-system", str(STATE))
    for ns in namespaces:
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", BRIDGE, check=False)
    _delete_veths()
    while sh("iptables", "-D", *RULE, check=False).returncode == 0:
        pass


def _delete_veths() -> None:
    """Delete the host ends of the nodes' veth pairs (a deleted bridge leaves its
    ports, and a deleted namespace frees its end only once nothing holds it)."""
    listed = sh("ip", "-o", "link", "show", check=False).stdout.splitlines()
    names = [line.split(":")[1].strip().split("@")[0] for line in listed]
    for name in names:
        if name.startswith(f"{PREFIX}-"):
            sh("ip", "link", "del", name, check=False)


def _stop_engines(namespaces: list[str]) -> None:
    """SIGTERM each node's dockerd (it stops its containers), waiting up to 30 s."""
    pids = [
        int(p.read_text())
        for p in STATE.glob("*/dockerd.pid")
        if p.read_text().strip().isdigit()
    ]
    _kill(pids, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return
        time.sleep(0.3)


def _running(pid: int) -> bool:
    """Whether `pid` runs (a child of this process that exited is reaped here)."""
    with contextlib.suppress(ChildProcessError):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _netns_pids(ns: str) -> list[int]:
    return [int(p) for p in sh("ip", "netns", "pids", ns, check=False).stdout.split()]


def _kill(pids: list[int], sig: signal.Signals = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _kill_containers() -> None:
    """SIGKILL every process in the nodes' container cgroups (a SIGKILLed engine's
    containers outlive it), then remove those cgroups, deepest first."""
    for _ in range(20):
        procs = Path("/sys/fs/cgroup/pids").glob(f"{PREFIX}-*/**/cgroup.procs")
        pids = [int(p) for f in procs for p in f.read_text().split()]
        if not pids:
            break
        _kill(pids)
        time.sleep(0.2)
    for controller in Path("/sys/fs/cgroup").iterdir():
        found = sorted(controller.glob(f"{PREFIX}-*/**/"), key=lambda p: -len(p.parts))
        for folder in found:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _unmount_under(folder: Path) -> None:
    """Lazily unmount `folder` and every mount point under it (overlays, shm, netns
    files), deepest first."""
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    under = [p for p in points if p == str(folder) or p.startswith(f"{folder}/")]
    for point in sorted(set(under), key=len, reverse=True):
        sh("umount", "-l", point, check=False)
