"""What the recipes are made of: a cache folder, PyPI packages installed into folders
of their own, Debian's chromium, stand-in servers in the background, a Docker network
of a run's own, mounts."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEBIAN_CHROMIUM",
    "Prepared",
    "background",
    "cache_dir",
    "docker_network",
    "ensure_chromium",
    "free_port",
    "mounts",
    "pip_target",
    "uv_dirs",
    "writable_by_all",
]


def cache_dir() -> Path:
    base = os.environ.get("OPENENV_V1_CACHE_DIR") or os.path.expanduser(
        "~/.cache/openenv-v1"
    )
    path = Path(base) / "compat"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Prepared:
    """What a recipe adds to an env's runs."""

    env_vars: dict[str, str] = field(default_factory=dict)
    """For the env server (`provider_kwargs.env_vars`)."""
    environ: dict[str, str] = field(default_factory=dict)
    """For the check and eval processes (and so uv, when it prepares the env)."""
    provider_kwargs: dict[str, Any] = field(default_factory=dict)
    """More launch options (Docker: mounts through `docker_run_args`)."""
    notes: list[str] = field(default_factory=list)


def pip_target(name: str, *packages: str) -> Path:
    """`packages` installed from PyPI into a folder of their own (once)."""
    target = cache_dir() / name
    marker = target / ".installed"
    if marker.exists():
        return target
    subprocess.run(
        ["uv", "pip", "install", "--quiet", "--target", str(target)]
        + ["--python", sys.executable, *packages],
        check=True,
    )
    marker.write_text(" ".join(packages))
    return target


def mounts(volumes: list[str]) -> dict[str, Any]:
    """`provider_kwargs` mounting each `HOST:CONTAINER[:ro]` into the container."""
    return {"docker_run_args": [arg for v in volumes for arg in ("-v", v)]}


def writable_by_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | (0o777 if path.is_dir() else 0o666))


DOCKER = os.environ.get("OPENENV_V1_DOCKER") or "docker"


@contextlib.contextmanager
def docker_network(name: str) -> Iterator[tuple[str, str]]:
    """A bridge network `name` with inter-container traffic off, removed on exit
    (once the containers on it are gone); yields its name and gateway address."""
    subprocess.run(
        [DOCKER, "network", "create", "--driver", "bridge"]
        + ["-o", "com.docker.network.bridge.enable_icc=false", name],
        check=True,
        capture_output=True,
    )
    try:
        gateway = subprocess.run(
            [DOCKER, "network", "inspect", name, "-f"]
            + ["{{(index .IPAM.Config 0).Gateway}}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        yield name, gateway
    finally:
        # The eval's and check's reapers remove their containers within seconds.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            done = subprocess.run(
                [DOCKER, "network", "rm", name], capture_output=True, text=True
            )
            if done.returncode == 0 or "not found" in done.stderr:
                break
            time.sleep(1)


@contextlib.contextmanager
def background(cmd: list[str], url: str, log_path: Path) -> Iterator[None]:
    """`cmd` running in its own process group until the block ends, once `url`
    answers."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    try:
        _wait_http(url, proc)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


DEBIAN_CHROMIUM = Path("/usr/lib/chromium/chromium")


def ensure_chromium() -> list[str]:
    """Debian's `chromium`, installed with apt-get when it is missing and this process
    is root (notes saying so); otherwise an error naming the command to run."""
    if DEBIAN_CHROMIUM.exists():
        return []
    command = "apt-get install -y chromium"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(
            f"browsergym_env needs Debian's chromium ({DEBIAN_CHROMIUM} is missing): "
            f"run `sudo apt-get update && sudo {command}`, then run this again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # A fresh machine has no package lists yet: update first, as apt-get needs.
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "chromium"],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(cmd)}` exited {done.returncode} (browsergym_env needs "
                f"Debian's chromium): {(done.stderr or done.stdout).strip()[-600:]}"
            )
    if not DEBIAN_CHROMIUM.exists():
        raise RuntimeError(f"`{command}` ran, but {DEBIAN_CHROMIUM} is still missing")
    return [f"Debian chromium installed by the recipe (`{command}`)"]


def uv_dirs() -> dict[str, str]:
    """uv's cache and Python folders as they are now (they follow HOME otherwise)."""
    found = {}
    for var, args in (
        ("UV_CACHE_DIR", ["cache", "dir"]),
        ("UV_PYTHON_INSTALL_DIR", ["python", "dir"]),
    ):
        out = subprocess.run(["uv", *args], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            found[var] = os.environ.get(var) or out.stdout.strip()
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the stand-in exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=1):
                return
        time.sleep(0.2)
    raise TimeoutError(f"{url} not up within {timeout:.0f}s")
