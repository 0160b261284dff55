"""`docker build` of an env folder's image: its arguments, network, lock and failure.

A folder is built as `openenv build` builds it (`build_args_of`), with BuildKit on
(env Dockerfiles use `RUN --mount=type=cache`), the image labelled `INPUTS_LABEL`
(what `prune` looks for). Builds run on Docker's default build network, whose `RUN`
steps do not reach this host's loopback services; `build_network` "host" runs them on
the host's, for registries that answer only there, and a build that fails on the
network names that setting (`build_failure`). One build of an image at a time on this
host (`build_lock`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import DOCKER_VAR, call_docker, docker_cli
from openenv_v1.core.launch.uv_prepared import cache_root
from openenv_v1.core.setting_names import setting

BUILD_NETWORK_VAR = "OPENENV_V1_BUILD_NETWORK"
"""The build network (`default` or `host`) where `build_network` is unset."""
BuildNetwork = Literal["default", "host"]
# What a `RUN` step that could not reach the network prints (pip, uv, apt, curl, git).
_NETWORK_FAILURES = re.compile(
    r"Temporary failure in name resolution|Temporary failure resolving|"
    r"Name or service not known|Could not resolve|failed to lookup address|"
    r"dns error|Network is unreachable|No route to host|Connection timed out|"
    r"Failed to establish a new connection|Could not connect to|"
    r"error sending request for url|ConnectTimeout|connect timeout|"
    r"Connection refused|i/o timeout",
    re.I,
)
INPUTS_LABEL = "org.openenv-v1.inputs"
OUTPUT_TAIL_CHARS = 3000


def build_args_of(folder: Path, mode: str = "standalone") -> dict[str, str]:
    """The build arguments `openenv build` passes for `folder` built in `mode`."""
    return {"BUILD_MODE": mode, "ENV_NAME": folder.name.replace("_env", "")}


def build_network(setting: BuildNetwork | None = None) -> BuildNetwork:
    """`setting`, else `$OPENENV_V1_BUILD_NETWORK`, else `default`."""
    chosen = setting or os.environ.get(BUILD_NETWORK_VAR) or "default"
    if chosen not in ("default", "host"):
        raise EnvFailure(
            f"{BUILD_NETWORK_VAR}={chosen!r} is not a build network: set it to "
            "`default` or `host`"
        )
    return chosen  # type: ignore[return-value]


def run_build(
    context: Path,
    dockerfile: Path,
    tag: str,
    build_args: Mapping[str, str],
    timeout_s: float,
    network: BuildNetwork = "default",
) -> None:
    argv = ["build", "--progress", "plain", "--network", network]
    argv += ["-f", str(dockerfile), "-t", tag, "--label", f"{INPUTS_LABEL}={tag}"]
    for key, value in build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    argv.append(str(context))
    try:
        result = call_docker(*argv, timeout=timeout_s, env={"DOCKER_BUILDKIT": "1"})
    except subprocess.TimeoutExpired as e:
        output = _text(e.stdout) + _text(e.stderr)
        raise EnvFailure(
            f"building {tag} from {dockerfile} took longer than {timeout_s:.0f}s; "
            f"its output ends with:\n{output[-OUTPUT_TAIL_CHARS:]}"
        ) from None
    except OSError as e:
        raise EnvFailure(f"cannot run {docker_cli()!r} to build {tag}: {e}") from e
    if result.returncode != 0:
        raise EnvFailure(
            build_failure(tag, dockerfile, result.stdout + result.stderr, network)
        )


def build_failure(
    tag: str, dockerfile: Path, output: str, network: BuildNetwork = "default"
) -> str:
    """A failed build's message: the failing step, the output's tail, and for a step
    that could not reach the network, the setting that builds on the host's."""
    if "buildx component is missing" in output or "requires buildx" in output:
        return (
            f"building {tag} needs BuildKit, and this `docker` client ({docker_cli()}) "
            "wants the buildx plugin for it: install docker-buildx, or point "
            f"{DOCKER_VAR} at a client with BuildKit built in (e.g. Debian's "
            "/usr/bin/docker)"
        )
    steps = dict(re.findall(r"^#(\d+) (\[.*?\] .*)$", output, re.M))
    failed = re.findall(r"^#(\d+) ERROR: (.*)$", output, re.M)
    where = ""
    if failed and failed[-1][0] in steps:
        where = f" at step `{steps[failed[-1][0]]}` ({failed[-1][1]})"
    hint = ""
    if network == "default" and _NETWORK_FAILURES.search(output):
        hint = (
            "; a step could not reach the network from Docker's default build "
            "network: where package registries answer only from this host's "
            "network, build on it with "
            f"{setting('provider_kwargs.build_network', 'host')} (or "
            f"{BUILD_NETWORK_VAR}=host), which also lets the Dockerfile's RUN steps "
            "reach this host's loopback services"
        )
    return (
        f"building {tag} from {dockerfile} failed{where}{hint}; its output ends "
        f"with:\n{output.strip()[-OUTPUT_TAIL_CHARS:]}"
    )


def _text(data: bytes | str | None) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return data or ""


def build_lock_dir() -> Path:
    """Where build locks live: the user's own cache, never a shared `/tmp`."""
    return cache_root() / "build-locks"


@contextlib.contextmanager
def build_lock(tag: str, timeout_s: float):
    """One build of `tag` at a time across this user's processes: an exclusive lock
    on a file opened with `O_NOFOLLOW` (a planted symlink fails), waited for at most
    `timeout_s`."""
    root = build_lock_dir()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = root / (hashlib.sha256(tag.encode()).hexdigest()[:16] + ".lock")
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as e:
        raise EnvFailure(
            f"cannot open the build lock {path} of {tag}: {e} (a symlink there is "
            "refused; remove it)"
        ) from None
    try:
        try:
            Retrying(
                stop=stop_after_delay(timeout_s),
                wait=wait_fixed(0.2),
                retry=retry_if_exception_type(BlockingIOError),
                reraise=True,
            )(fcntl.flock, fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise EnvFailure(
                f"another build of {tag} on this host held its lock ({path}) "
                f"for over {timeout_s:.0f}s; let it finish, or end it"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
