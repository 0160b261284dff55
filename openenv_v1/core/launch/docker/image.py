"""The image a Docker launch runs: a given one, or one built from the env's folder.

`DockerLaunch` picks, in order: `provider_kwargs.image` as given (a local or registry
image); with a local `project_path`, an image built from that folder's own Dockerfile
(`server/Dockerfile`, else `Dockerfile`); else the Hugging Face Space's image
`registry.hf.space/<owner>-<name>:<tag>`.

A folder is built as OpenEnv's `openenv build` builds it: the folder is the build
context (`docker_context`: the repo root instead for an in-repo env whose Dockerfile
copies from it), with the build arguments `BUILD_MODE` (`standalone` or `in-repo`)
and `ENV_NAME=<folder name without _env>`. BuildKit is on (env Dockerfiles use `RUN
--mount=type=cache`). The tag names a hash of the context's files the image is made
of (and of the build arguments and the ids of the local images its stages start
FROM), `openenv-v1/<folder>:<hash>`, so an unchanged folder on an unchanged base
reuses its image and an edited one is rebuilt. A failed build raises `EnvFailure`
naming the failing step and the tail of its output.

Builds run on Docker's default build network, so a Dockerfile's `RUN` steps do not
reach this host's loopback services; `network="host"` (`provider_kwargs.build_network`,
or `OPENENV_V1_BUILD_NETWORK=host`) runs them on the host's network, for hosts whose
package registries answer only there. A build that fails on the network says so,
naming that setting. One build of an image at a time on this host: a lock file under
the user's cache directory, opened without following symlinks, waited for no longer
than the build's own timeout.

    built = ensure_env_image("/path/to/maze_env")
    print(built.image, "reused" if built.reused else f"built in {built.seconds:.0f}s")
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.context import build_context

DOCKER_VAR = "OPENENV_V1_DOCKER"
"""Environment variable naming the `docker` client to run (default: `docker` on PATH)."""
BUILD_NETWORK_VAR = "OPENENV_V1_BUILD_NETWORK"
"""Environment variable setting the build network (`default` or `host`) where
`provider_kwargs.build_network` does not."""
BuildNetwork = Literal["default", "host"]
CACHE_DIR_VAR = "OPENENV_V1_CACHE_DIR"
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
BUILD_TIMEOUT_S = 1800.0
OUTPUT_TAIL_CHARS = 3000
# Never part of the image's inputs: caches and VCS data that builds do not read.
_SKIPPED = {
    ".git",
    "__pycache__",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
}


def docker_cli() -> str:
    """The `docker` client to run: `$OPENENV_V1_DOCKER`, else `docker` on PATH."""
    return os.environ.get(DOCKER_VAR) or "docker"


def run_docker(
    *args: str, timeout: float = 30.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`docker <args>` with its output captured; a timeout is exit code 124 (with
    the reason as stderr), a client that cannot run an `EnvFailure` naming it. `env`
    is added to this process's environment (variables passed by name)."""
    try:
        return subprocess.run(
            [docker_cli(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            args, 124, "", f"timed out after {timeout:.0f}s"
        )
    except OSError as e:
        raise EnvFailure(
            f"cannot run the Docker client {docker_cli()!r}: {e} (install Docker, "
            "or point OPENENV_V1_DOCKER at its `docker`)"
        ) from e


@dataclass(frozen=True)
class EnvImage:
    """The image a launch runs, and how it was had."""

    image: str
    source: str
    """`image setting`, `built from <dockerfile>`, or `Space image`."""
    reused: bool | None = None
    """For a built image: it was already there for these files (None otherwise)."""
    seconds: float = 0.0
    """Time spent finding or building it."""


def dockerfile_of(folder: Path) -> Path | None:
    """The env folder's Dockerfile, where `openenv build` looks for it."""
    for candidate in (folder / "server" / "Dockerfile", folder / "Dockerfile"):
        if candidate.is_file():
            return candidate
    return None


def base_images(dockerfile: Path, build_args: Mapping[str, str]) -> list[str]:
    """The images the Dockerfile's stages start `FROM` (build-argument defaults and
    `build_args` substituted; earlier stages and `scratch` left out)."""
    args = dict(build_args)
    stages: set[str] = set()
    images: list[str] = []
    for line in dockerfile.read_text(errors="replace").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].upper() == "ARG" and "=" in words[1]:
            name, _, default = words[1].partition("=")
            args.setdefault(name, default.strip("\"'"))
        elif len(words) >= 2 and words[0].upper() == "FROM":
            rest = [w for w in words[1:] if not w.startswith("--")]
            image = re.sub(
                r"\$\{?(\w+)\}?", lambda m: args.get(m[1], ""), rest[0] if rest else ""
            )
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
            if image and image.lower() not in stages | {"scratch"}:
                images.append(image)
    return images


def _image_id(image: str) -> str:
    """The local image's id, or "" when it is not here (the build pulls it)."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        result = subprocess.run(
            [docker_cli(), "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return result.stdout.strip() if result.returncode == 0 else ""
    return ""


def inputs_hash(
    root: Path, inputs: tuple[str, ...], build_args: Mapping[str, str]
) -> str:
    """A hash of every file under the `inputs` paths of `root` (path, mode and bytes;
    caches and `.git` left out; globs expanded) and of `build_args` (the build
    arguments and the ids of the base images)."""
    digest = hashlib.sha256()
    for key in sorted(build_args):
        digest.update(f"arg {key}={build_args[key]}\0".encode())
    for relative in inputs:
        if inputs != (".",):  # a whole folder hashes as it always has
            digest.update(f"input {relative}\0".encode())
        if any(c in relative for c in "*?["):
            paths = sorted(root.glob(relative))
        else:
            paths = [root / relative]
        for path in paths:
            _hash_tree(digest, root, path)
    return digest.hexdigest()[:16]


def _hash_tree(digest: Any, root: Path, top: Path) -> None:
    walked = [(str(top.parent), [], [top.name])] if not top.is_dir() else os.walk(top)
    for parent, dirs, files in walked:
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED)
        for name in sorted(files):
            if name.endswith(".pyc"):
                continue
            path = Path(parent) / name
            relative = path.relative_to(root).as_posix()
            with contextlib.suppress(OSError):
                if path.is_symlink():
                    digest.update(f"link {relative} {os.readlink(path)}\0".encode())
                    continue
                mode = path.stat().st_mode & 0o111
                digest.update(f"file {relative} {mode:o}\0".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())


def build_args_of(folder: Path, mode: str = "standalone") -> dict[str, str]:
    """The build arguments `openenv build` passes for an env folder built in `mode`
    (`standalone` or `in-repo`)."""
    return {"BUILD_MODE": mode, "ENV_NAME": folder.name.replace("_env", "")}


def image_tag(folder: Path, digest: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", folder.name.lower()).strip("-.") or "env"
    return f"openenv-v1/{name}:{digest}"


def build_network(setting: BuildNetwork | None = None) -> BuildNetwork:
    """The build network: `setting`, else `$OPENENV_V1_BUILD_NETWORK`, else
    `default` (an unknown value of the variable is an `EnvFailure`)."""
    chosen = setting or os.environ.get(BUILD_NETWORK_VAR) or "default"
    if chosen not in ("default", "host"):
        raise EnvFailure(
            f"{BUILD_NETWORK_VAR}={chosen!r} is not a build network: set it to "
            "`default` or `host`"
        )
    return chosen  # type: ignore[return-value]


def ensure_env_image(
    folder: str | Path,
    *,
    timeout_s: float = BUILD_TIMEOUT_S,
    network: BuildNetwork | None = None,
) -> EnvImage:
    """The image built from `folder`'s Dockerfile for its current files: reused when
    present, built otherwise on the build `network` (see `build_network`), one build
    at a time per image on this host. The build network is not part of the tag: an
    image built either way is reused."""
    started = time.monotonic()
    folder = Path(folder).resolve()
    dockerfile = dockerfile_of(folder)
    if dockerfile is None:
        raise EnvFailure(
            f"{folder} has no server/Dockerfile or Dockerfile to build an image from: "
            "add one, or set task.user.provider_kwargs.image to an existing image"
        )
    context = build_context(folder, dockerfile, build_args_of(folder))
    build_args = build_args_of(folder, context.mode)
    bases = {image: _image_id(image) for image in base_images(dockerfile, build_args)}
    digest = inputs_hash(context.root, context.inputs, {**build_args, **bases})
    tag = image_tag(folder, digest)
    source = f"built from {dockerfile}"
    if context.mode == "in-repo":
        source += f" (context {context.root}, as the Dockerfile copies from it)"
    chosen = build_network(network)
    with build_lock(tag, timeout_s):
        if _image_exists(tag):
            return EnvImage(
                tag, source, reused=True, seconds=time.monotonic() - started
            )
        _build(context.root, dockerfile, tag, build_args, timeout_s, chosen)
    return EnvImage(tag, source, reused=False, seconds=time.monotonic() - started)


def image_for(
    env: str,
    image: str | None,
    project_path: str | None,
    tag: str = "latest",
    build_network: BuildNetwork | None = None,
) -> EnvImage:
    """The image a launch of `env` runs: `image` as given; else, for a local
    `project_path`, the image built from its Dockerfile (`ensure_env_image`); else the
    Space's image `registry.hf.space/<owner>-<name>:<tag>`. Raises `EnvFailure` for a
    `project_path` that is not a folder."""
    if image:
        return EnvImage(image, "image setting")
    if project_path and not project_path.startswith("git+"):
        if not os.path.isdir(project_path):
            raise EnvFailure(
                f"project_path {project_path!r} is not a directory; set "
                "task.user.provider_kwargs.project_path to the env's folder (its "
                "Dockerfile is built), or provider_kwargs.image to an image"
            )
        return ensure_env_image(project_path, network=build_network)
    from openenv_v1.core.openenv_lines import hf_space_subdomain

    return EnvImage(f"registry.hf.space/{hf_space_subdomain(env)}:{tag}", "Space image")


def _image_exists(image: str) -> bool:
    try:
        result = subprocess.run(
            [docker_cli(), "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise EnvFailure(f"cannot ask Docker about image {image}: {e}") from e
    return result.returncode == 0


def _build(
    context: Path,
    dockerfile: Path,
    tag: str,
    build_args: Mapping[str, str],
    timeout_s: float,
    network: BuildNetwork = "default",
) -> None:
    argv = [docker_cli(), "build", "--progress", "plain", "--network", network]
    argv += ["-f", str(dockerfile), "-t", tag, "--label", f"{INPUTS_LABEL}={tag}"]
    for key, value in build_args.items():
        argv += ["--build-arg", f"{key}={value}"]
    argv.append(str(context))
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
        )
    except subprocess.TimeoutExpired as e:
        output = _text(e.stdout) + _text(e.stderr)
        raise EnvFailure(
            f"building {tag} from {dockerfile} took longer than {timeout_s:.0f}s; "
            f"its output ends with:\n{output[-OUTPUT_TAIL_CHARS:]}"
        ) from None
    except OSError as e:
        raise EnvFailure(f"cannot run {argv[0]!r} to build {tag}: {e}") from e
    if result.returncode != 0:
        raise EnvFailure(
            build_failure(tag, dockerfile, result.stdout + result.stderr, network)
        )


def build_failure(
    tag: str, dockerfile: Path, output: str, network: BuildNetwork = "default"
) -> str:
    """What a failed `docker build --progress plain` says, for the person reading it:
    the failing step and the tail of the output, and, for a step that could not
    reach the network on Docker's default build network, the setting that builds
    on the host's."""
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
            'network, build on it with provider_kwargs.build_network = "host" (or '
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
    """Where build locks live: `build-locks` under `$OPENENV_V1_CACHE_DIR`, else
    `$XDG_CACHE_HOME/openenv-v1` (`~/.cache/openenv-v1`): the user's own, never a
    shared `/tmp`."""
    root = os.environ.get(CACHE_DIR_VAR) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "openenv-v1",
    )
    return Path(root) / "build-locks"


@contextlib.contextmanager
def build_lock(tag: str, timeout_s: float):
    """One build of `tag` at a time across this user's processes: an exclusive lock
    on a file opened with `O_NOFOLLOW` (a symlink planted there fails, never
    followed), waited for at most `timeout_s` (an `EnvFailure` then)."""
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
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise EnvFailure(
                        f"another build of {tag} on this host held its lock ({path}) "
                        f"for over {timeout_s:.0f}s; let it finish, or end it"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
