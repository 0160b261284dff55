"""A real Docker engine for the tests and CI, and the stand-in OpenEnv base image.

OpenEnv's env Dockerfiles start `FROM ghcr.io/huggingface/openenv-base:latest` (since the
repository moved to huggingface/OpenEnv; before, `ghcr.io/meta-pytorch/openenv-base`),
and no image registry is reachable from these machines. So this module:

- `ensure_engine()`: uses the engine that answers; else, as root, installs Debian's
  `docker.io` when `dockerd` is missing and starts `dockerd` in the background,
  recording that it did (`STATE_FILE`) so `stop_engine()` stops only what was
  started here;
- `ensure_base_image()`: builds a stand-in for `BASE_IMAGE` from Debian packages
  (`debootstrap`, then `docker import`) and PyPI (uv, uvicorn, fastapi), with this
  machine's CA bundle inside (the registries are reached through a TLS-inspecting
  path). The image carries a hash of its inputs as a label and is rebuilt only when
  they change. It answers to both names (`BASE_ALIASES`).

Only the standard library is used, so CI runs it before any environment exists:

    python3 -m tests.docker_engine up --until-pid $$   # engine + base; stop at exit
    python3 -m tests.docker_engine down                # stop an engine started here
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DOCKER = "/usr/bin/docker"
"""Debian's client: BuildKit works with `DOCKER_BUILDKIT=1` and no buildx (the newer
client some images ship in /usr/local/bin wants buildx)."""
BASE_IMAGE = "ghcr.io/meta-pytorch/openenv-base:latest"
BASE_ALIASES = ("ghcr.io/huggingface/openenv-base:latest",)
"""The base's name since OpenEnv moved to huggingface/OpenEnv: the stand-in is tagged
so too."""
PYTHON_IMAGE = "python:3.11-slim"
"""Some env Dockerfiles start FROM it (coding_env): the stand-in base is tagged so too,
unless a real one is here."""
ROOTFS_IMAGE = "openenv-v1/bookworm-minbase"
INPUTS_LABEL = "org.openenv-v1.base-inputs"
STATE_FILE = Path("/run/openenv-v1-dockerd.json")
DOCKERD_LOG = Path("/var/log/openenv-v1-dockerd.log")
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SUITE = "bookworm"
PACKAGES = "python3,python3-venv,python3-pip,curl,ca-certificates,git"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
ENGINE_START_S = 60.0

# What `ghcr.io/meta-pytorch/openenv-base` (python:3.11-slim + uv + curl) gives env
# Dockerfiles: `python`, `uv` and uvicorn on PATH, /app, UV_SYSTEM_PYTHON, port 8000;
# plus the CA bundle and TLS settings pip and uv need here.
BASE_DOCKERFILE = """\
FROM {rootfs}
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \\
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \\
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \\
    UV_NATIVE_TLS=1 \\
    UV_SYSTEM_PYTHON=1 \\
    UV_COMPILE_BYTECODE=1 \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PYTHONUNBUFFERED=1 \\
    LANG=C.UTF-8
RUN rm -f /usr/lib/python3*/EXTERNALLY-MANAGED \\
    && ln -sf /usr/bin/python3 /usr/local/bin/python \\
    && python3 -m pip install --no-cache-dir uv uvicorn fastapi
WORKDIR /app
EXPOSE 8000
"""


class EngineUnavailable(RuntimeError):
    """No Docker engine answers and none can be started here; says why."""


@dataclass(frozen=True)
class Engine:
    started_here: bool
    """This call started `dockerd` (and `stop_engine()` will stop it)."""


def docker(
    *args: str, timeout: float = 60.0, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess[str]:
    """Run Debian's `docker` client; output captured as text."""
    return subprocess.run(
        [DOCKER, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
        env=env,
    )


def engine_answers() -> bool:
    if not os.path.exists(DOCKER):
        return False
    try:
        return (
            docker(
                "info", "--format", "{{.ServerVersion}}", timeout=20, check=False
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_engine(*, install: bool = True) -> Engine:
    """An answering engine: the running one, or `dockerd` started here (installed
    first with apt when `install` and it is missing). Raises `EngineUnavailable`.
    Concurrent callers (a test run's workers) take turns: one starts it, the others
    find it running. The `dockerd` started here is not bound to the caller's life
    (see `stop_when_gone`)."""
    if engine_answers():
        return Engine(started_here=False)
    with open(STATE_FILE.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if engine_answers():
            return Engine(started_here=False)
        return _start_engine(install)


def _start_engine(install: bool) -> Engine:
    if os.geteuid() != 0:
        raise EngineUnavailable(
            "no Docker engine answers and starting one needs root (run `dockerd`, or "
            "run the tests as root)"
        )
    if shutil.which("dockerd") is None or not os.path.exists(DOCKER):
        if not install:
            raise EngineUnavailable(
                "no Docker engine answers and Docker is not installed: "
                "`apt-get install -y docker.io`, or `python3 -m tests.docker_engine up`"
            )
        _apt_install("docker.io")
    DOCKERD_LOG.parent.mkdir(parents=True, exist_ok=True)
    with open(DOCKERD_LOG, "ab") as log:
        process = subprocess.Popen(
            ["dockerd"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_outlive_the_caller,
        )
    STATE_FILE.write_text(json.dumps({"pid": process.pid}))
    deadline = time.monotonic() + ENGINE_START_S
    while not engine_answers():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_engine()
            tail = DOCKERD_LOG.read_text(errors="replace")[-2000:]
            raise EngineUnavailable(
                f"dockerd did not come up; its log ends with:\n{tail}"
            )
        time.sleep(0.5)
    return Engine(started_here=True)


def stop_engine(timeout_s: float = 30.0) -> bool:
    """Stop the `dockerd` that `ensure_engine()` started (it stops its containers
    first); False when none was started here."""
    try:
        pid = int(json.loads(STATE_FILE.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    STATE_FILE.unlink(missing_ok=True)
    return True


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _apt_install(*packages: str) -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *packages], check=True, env=env)


def debian_mirror() -> str:
    """The Debian archive apt uses here (`$OPENENV_V1_DEBIAN_MIRROR` wins)."""
    if mirror := os.environ.get("OPENENV_V1_DEBIAN_MIRROR"):
        return mirror
    sources = [
        Path("/etc/apt/sources.list"),
        *Path("/etc/apt/sources.list.d").glob("*"),
    ]
    for path in sources:
        with contextlib.suppress(OSError):
            text = path.read_text()
            for line in text.splitlines():
                found = re.match(r"\s*(?:URIs:|deb)\s+(?:\[[^]]*\]\s+)?(\S+)", line)
                if found and re.search(r"/debian/?$", found[1]):
                    return found[1].rstrip("/")
    return DEFAULT_MIRROR


def _inputs_hash(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def _image_label(image: str, label: str) -> str | None:
    result = docker(
        "image",
        "inspect",
        "--format",
        f'{{{{index .Config.Labels "{label}"}}}}',
        image,
        check=False,
    )
    return result.stdout.strip() if result.returncode == 0 else None


def _image_exists(image: str) -> bool:
    return docker("image", "inspect", image, check=False).returncode == 0


def ensure_base_image(log=print) -> str:
    """Build the stand-in `BASE_IMAGE` unless the one present was built from the same
    inputs; returns `"reused"` or `"built"`."""
    mirror = debian_mirror()
    rootfs_hash = _inputs_hash(SUITE.encode(), PACKAGES.encode(), b"minbase")
    rootfs = f"{ROOTFS_IMAGE}:{rootfs_hash}"
    ca = CA_BUNDLE.read_bytes()
    dockerfile = BASE_DOCKERFILE.format(rootfs=rootfs)
    inputs = _inputs_hash(dockerfile.encode(), ca)
    if _image_label(BASE_IMAGE, INPUTS_LABEL) == inputs:
        _tag_python_image(inputs)
        return "reused"
    if not _image_exists(rootfs):
        _build_rootfs(rootfs, mirror, log)
    with tempfile.TemporaryDirectory(prefix="openenv-v1-base-") as context:
        (Path(context) / "Dockerfile").write_text(dockerfile)
        (Path(context) / "ca-certificates.crt").write_bytes(ca)
        log(f"building {BASE_IMAGE} (inputs {inputs})")
        result = docker(
            "build",
            "--network",
            "host",
            "--label",
            f"{INPUTS_LABEL}={inputs}",
            "-t",
            BASE_IMAGE,
            context,
            timeout=900,
            check=False,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"building {BASE_IMAGE} failed:\n{(result.stdout + result.stderr)[-3000:]}"
            )
    _tag_python_image(inputs)
    return "built"


def _tag_python_image(inputs: str) -> None:
    """Tag the stand-in base with its other names: `BASE_ALIASES`, and
    `PYTHON_IMAGE` unless a real one is here."""
    for alias in BASE_ALIASES:
        docker("tag", BASE_IMAGE, alias)
    if _image_label(PYTHON_IMAGE, INPUTS_LABEL) in (None, inputs):
        docker("tag", BASE_IMAGE, PYTHON_IMAGE)


def _build_rootfs(image: str, mirror: str, log) -> None:
    if shutil.which("debootstrap") is None:
        _apt_install("debootstrap")
    with tempfile.TemporaryDirectory(prefix="openenv-v1-rootfs-") as root:
        log(f"debootstrap {SUITE} from {mirror} (about 80 s)")
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={PACKAGES}",
                SUITE,
                root,
                mirror,
            ],
            check=True,
            capture_output=True,
            timeout=1200,
        )
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        subprocess.run(
            [DOCKER, "import", "-", image],
            stdin=tar.stdout,
            check=True,
            capture_output=True,
            timeout=600,
        )
        tar.stdout.close()
        if tar.wait() != 0:
            raise RuntimeError("tar of the debootstrap root failed")


def _outlive_the_caller() -> None:
    """A `preexec_fn` that does nothing: in a test run, it keeps `tests/lifetime.py`
    from giving the child a parent-death signal, so that an engine or its watcher
    started by one pytest-xdist worker lives on while the others use it."""


def stop_when_gone(pid: int) -> None:
    """Stop the engine started here once process `pid` has exited, however it
    exits (SIGKILL included): a watcher process of its own, in its own session."""
    subprocess.Popen(
        [sys.executable, "-m", "tests.docker_engine", "watch", str(pid)],
        cwd=Path(__file__).resolve().parent.parent,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=_outlive_the_caller,
    )


def _watch(pid: int) -> None:
    """Stop the engine started here once process `pid` is gone."""
    while _alive(pid):
        time.sleep(1.0)
    stop_engine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tests.docker_engine")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="engine (installed/started if needed) + base image")
    up.add_argument(
        "--until-pid",
        type=int,
        help="stop an engine started here once this process exits (CI: $$)",
    )
    up.add_argument("--no-base", action="store_true", help="skip the base image")
    sub.add_parser("down", help="stop the engine `up` started, if it did")
    watch = sub.add_parser("watch", help=argparse.SUPPRESS)
    watch.add_argument("pid", type=int)
    args = parser.parse_args(argv)
    if args.command == "down":
        print("dockerd stopped" if stop_engine() else "no dockerd started here")
        return 0
    if args.command == "watch":
        _watch(args.pid)
        return 0
    started = time.monotonic()
    try:
        engine = ensure_engine()
    except EngineUnavailable as e:
        print(f"no Docker engine: {e}", file=sys.stderr)
        return 1
    print(
        f"docker engine: {'started' if engine.started_here else 'running'} "
        f"({time.monotonic() - started:.1f}s)",
        flush=True,
    )
    if engine.started_here and args.until_pid:
        stop_when_gone(args.until_pid)
    if not args.no_base:
        started = time.monotonic()
        how = ensure_base_image(log=lambda m: print(m, flush=True))
        print(f"{BASE_IMAGE}: {how} ({time.monotonic() - started:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
