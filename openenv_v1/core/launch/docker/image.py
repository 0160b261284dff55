"""The image a Docker launch runs: `provider_kwargs.image` as given; else, for a local
`project_path`, one built from its Dockerfile (`server/Dockerfile`, else
`Dockerfile`); else the Space's image `registry.hf.space/<owner>-<name>:<tag>`.

A folder's image is `openenv-v1/<folder>:<hash>`, the hash of the build context's
files (`context`), the build arguments and the ids of the local images its stages
start FROM: an unchanged folder on an unchanged base reuses its image, an edited one
is rebuilt (`build`). `name_for` is a unique name for a container or service.

    built = ensure_env_image("/path/to/maze_env")
    print(built.image, "reused" if built.reused else f"built in {built.seconds:.0f}s")
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.build import (
    BuildNetwork,
    build_args_of,
    build_lock,
    build_network,
    run_build,
)
from openenv_v1.core.launch.docker.cli import run_docker
from openenv_v1.core.launch.docker.context import (
    arg_default,
    build_context,
    dockerfile_lines,
    expand,
)
from openenv_v1.core.launch.env_project import local_folder
from openenv_v1.core.setting_names import setting

BUILD_TIMEOUT_S = 1800.0
# Never part of the image's inputs: caches and VCS data that builds do not read.
_SKIPPED = {
    ".git",
    "__pycache__",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
}


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
    for line in dockerfile_lines(dockerfile):
        words = line.split()
        if arg := arg_default(words):
            args.setdefault(*arg)
        elif len(words) >= 2 and words[0].upper() == "FROM":
            rest = [w for w in words[1:] if not w.startswith("--")]
            image = expand(rest[0], args) if rest else ""
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
            if image and image.lower() not in stages | {"scratch"}:
                images.append(image)
    return images


def _image_id(image: str) -> str:
    """The local image's id; "" when it is not here or Docker cannot say."""
    result = run_docker("image", "inspect", "--format", "{{.Id}}", image)
    return result.stdout.strip() if result.returncode == 0 else ""


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


def image_tag(folder: Path, digest: str) -> str:
    name = re.sub(r"[^a-z0-9_.-]+", "-", folder.name.lower()).strip("-.") or "env"
    return f"openenv-v1/{name}:{digest}"


def ensure_env_image(
    folder: str | Path,
    *,
    timeout_s: float = BUILD_TIMEOUT_S,
    network: BuildNetwork | None = None,
) -> EnvImage:
    """The image built from `folder`'s Dockerfile for its current files: reused when
    present (whatever network built it), else built on `network`, one build at a
    time per image on this host."""
    started = time.monotonic()
    folder = Path(folder).resolve()
    dockerfile = dockerfile_of(folder)
    if dockerfile is None:
        raise EnvFailure(
            f"{folder} has no server/Dockerfile or Dockerfile to build an image from: "
            f"add one, or set {setting('provider_kwargs.image')} to an existing image"
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
        if _image_id(tag):
            return EnvImage(
                tag, source, reused=True, seconds=time.monotonic() - started
            )
        run_build(context.root, dockerfile, tag, build_args, timeout_s, chosen)
    return EnvImage(tag, source, reused=False, seconds=time.monotonic() - started)


def image_for(
    env: str,
    image: str | None,
    project_path: str | None,
    tag: str = "latest",
    build_network: BuildNetwork | None = None,
) -> EnvImage:
    """The image a launch of `env` runs, as the module docstring says."""
    if image:
        return EnvImage(image, "image setting")
    fix = (
        "the env's folder (its Dockerfile is built), or "
        f"{setting('provider_kwargs.image')} to an image"
    )
    if folder := local_folder(project_path, fix):
        return ensure_env_image(folder, network=build_network)
    from openenv_v1.core.openenv_lines import hf_space_subdomain

    return EnvImage(f"registry.hf.space/{hf_space_subdomain(env)}:{tag}", "Space image")


def image_user(image: str) -> str:
    """The user the image's config names (`USER`), "" for none or unknown."""
    result = run_docker("image", "inspect", "--format", "{{.Config.User}}", image)
    return result.stdout.strip() if result.returncode == 0 else ""


def name_for(image: str, kind: str = "") -> str:
    """A name for a container (or, with `kind` "swarm", a service) of `image`, unique
    on the engine: the image's name, the time and a random suffix (containers of
    one image may start within the same millisecond). Swarm takes no `_` and 63
    characters at most."""
    repository = image.rpartition("/")[2].partition(":")[0].replace("_", "-")
    name = f"{repository}-{kind}-" if kind else f"{repository}-"
    name = f"{name}{int(time.time() * 1000)}"[-40:].lstrip("-.")
    return f"{name}-{secrets.token_hex(3)}"
