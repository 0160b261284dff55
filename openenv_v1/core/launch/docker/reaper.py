"""No container left behind: labels on everything started, and a reaper per owner.

The Docker daemon owns containers, Swarm services and networks, so no signal reaches
them when the process that started them dies. So everything this package starts
carries labels (`owner_labels()`), and the first one a process starts also starts a
reaper for it (`ensure_reaper()`): a process in a session of its own holding the
read end of a pipe only the owner writes. When the owner is gone (however it ends),
the pipe reaches end-of-file and the reaper removes everything labelled with the
owner's token, a few times over the next 20 s. A reaper that was itself killed
leaves its owner's things to the next one started on this host (`sweep_orphans()`),
which removes those whose owner, on this host and boot and in this PID namespace, no
longer exists. The reaper runs this file as a script with the standard library only.

    argv += label_args("docker", env="org/maze")       # ["--label", "k=v", ...]
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

MANAGED_LABEL = "org.openenv-v1.managed"
OWNER_LABEL = "org.openenv-v1.owner"
"""`<host>/<boot id>/pidns<inode>/<pid>/<start time>` of the process that started it."""
RUN_LABEL = "org.openenv-v1.run"
ENV_LABEL = "org.openenv-v1.env"
SHARED_NETWORKS = ("openenv-v1-isolated", "openenv-v1-egress")
"""The networks every owner's env containers share (`network`): each reaper tries
to remove them once its owner is gone (Docker refuses while one is in use)."""
RUN_ID_VAR = "OPENENV_V1_RUN_ID"
"""Its value becomes every container's run label (default: the owner token)."""
# Sweeps after the owner is gone: at once, then for runs still under way.
_SWEEP_DELAYS_S = (0.0, 3.0, 10.0, 20.0)
# What a sweep removes, in order (a service before its containers, else Swarm
# replaces them; networks last), with the `docker` arguments that list and remove it.
_KINDS = {
    "service": (("service", "ls"), ("service", "rm")),
    "container": (("ps", "-a"), ("rm", "-f")),
    "network": (("network", "ls"), ("network", "rm")),
}

_lock = threading.Lock()
# (pid, client path, DOCKER_HOST) -> (reaper, write end of its pipe).
_reapers: dict[tuple[int, str, str], tuple[subprocess.Popen, int]] = {}


def _boot_id() -> str:
    with contextlib.suppress(OSError):
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return "unknown-boot"


def _start_time(pid: int) -> str | None:
    """The process's start time since boot (tells it from a later one of its pid)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def host_prefix() -> str:
    return f"{socket.gethostname()}/{_boot_id()}"


def pid_namespace() -> str:
    """This process's PID namespace, `pidns<inode>` (`pidns?` where /proc hides it)."""
    with contextlib.suppress(OSError):
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
        return "pidns" + link.partition("[")[2].rstrip("]")
    return "pidns?"


def owner_token(pid: int | None = None) -> str:
    """The token naming process `pid` (this one by default) of this PID namespace."""
    pid = os.getpid() if pid is None else pid
    return f"{host_prefix()}/{pid_namespace()}/{pid}/{_start_time(pid) or '0'}"


def owner_alive(token: str) -> bool:
    """Whether the owner named by `token` still runs; True for one this process
    cannot tell (another host, boot or PID namespace)."""
    parts = token.rsplit("/", 3)
    if len(parts) != 4 or parts[0] != host_prefix() or not parts[2].isdigit():
        return True
    if parts[1] != pid_namespace() or parts[1] == "pidns?":
        return True
    return _start_time(int(parts[2])) == parts[3]


def owner_labels(docker: str, env: str | None = None) -> dict[str, str]:
    """The labels of a container this process starts with `docker`; starts this
    process's reaper first, so none is ever unwatched."""
    token = owner_token()
    ensure_reaper(docker, token)
    labels = {
        MANAGED_LABEL: "1",
        OWNER_LABEL: token,
        RUN_LABEL: os.environ.get(RUN_ID_VAR) or token,
    }
    if env:
        labels[ENV_LABEL] = env
    return labels


def label_args(
    docker: str, env: str | None = None, flags: tuple[str, ...] = ("--label",)
) -> list[str]:
    """`owner_labels(docker, env)` as `docker` options, after each of `flags`."""
    labels = owner_labels(docker, env)
    return [
        arg for k, v in labels.items() for flag in flags for arg in (flag, f"{k}={v}")
    ]


def ensure_reaper(docker: str, token: str | None = None) -> None:
    """Start this process's reaper for `docker` and its daemon, unless it runs."""
    docker = shutil.which(docker) or docker
    key = (os.getpid(), docker, os.environ.get("DOCKER_HOST", ""))
    with _lock:
        running = _reapers.get(key)
        if running is not None and running[0].poll() is None:
            return
        read_fd, write_fd = os.pipe()  # both non-inheritable (PEP 446)
        try:
            process = subprocess.Popen(
                [sys.executable, "-S", __file__, token or owner_token(), docker],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            os.close(read_fd)
        # The write end stays open, unused, for this process's life.
        _reapers[key] = (process, write_fd)


def labelled(docker: str, kind: str, *filters: str) -> list[str]:
    """Ids of `kind` matching every `label=` filter; [] where Docker cannot say."""
    argv = [docker, *_KINDS[kind][0], "-q"]
    for label in filters:
        argv += ["--filter", f"label={label}"]
    try:
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return result.stdout.split() if result.returncode == 0 else []


def remove(docker: str, ids: list[str], kind: str = "container") -> None:
    if ids:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run(
                [docker, *_KINDS[kind][1], *ids],
                capture_output=True,
                timeout=60,
                check=False,
            )


def sweep_owner(docker: str, token: str) -> None:
    for kind in _KINDS:
        remove(docker, labelled(docker, kind, f"{OWNER_LABEL}={token}"), kind)


def remove_idle_shared_networks(docker: str) -> None:
    """Remove the shared env networks; Docker keeps any a container still uses."""
    for name in SHARED_NETWORKS:  # one at a time: `network rm` stops at a failure
        remove(docker, [name], "network")


def sweep_orphans(docker: str) -> None:
    """Remove this package's things whose owner process on this host is gone."""
    for kind in _KINDS:
        orphans = []
        for found, token in _owners(docker, kind):
            if token and not owner_alive(token):
                orphans.append(found)
        remove(docker, orphans, kind)


def _owners(docker: str, kind: str) -> list[tuple[str, str]]:
    """(id, owner token) of this package's `kind`s (`docker service ls` has no
    `.Label` in its format: services are inspected)."""
    owner = f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'
    argv = [docker, *_KINDS[kind][0], "--filter", f"label={MANAGED_LABEL}"]
    if kind == "service":
        ids = labelled(docker, kind, MANAGED_LABEL)
        if not ids:
            return []
        owner = f'{{{{.ID}}}} {{{{index .Spec.Labels "{OWNER_LABEL}"}}}}'
        argv = [docker, "service", "inspect", *ids]
    try:
        result = subprocess.run(
            [*argv, "--format", owner],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    lines = result.stdout.splitlines() if result.returncode == 0 else []
    return [tuple(line.partition(" ")[::2]) for line in lines]  # type: ignore[misc]


def _reap(token: str, docker: str) -> None:
    """The reaper's life: sweep earlier owners' orphans, wait for the owner to go
    (end-of-file on stdin, or its pid gone), then sweep."""
    sweep_orphans(docker)
    while owner_alive(token):
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            break
    started = time.monotonic()
    for delay in _SWEEP_DELAYS_S:
        time.sleep(max(0.0, started + delay - time.monotonic()))
        sweep_owner(docker, token)
    remove_idle_shared_networks(docker)


if __name__ == "__main__":
    _reap(sys.argv[1], sys.argv[2])
