"""`openenv-v1 cache`: the prepared environments of UV-launched env servers
(`core.launch.cache`) and the env images the package built
(`core.launch.docker.prune`), listed and pruned. Nothing a running eval uses is ever
removed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import time

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.cache import (
    MAX_GB_VAR,
    PreparedEnv,
    cache_bound,
    prepared_envs,
    prune_prepared_envs,
)
from openenv_v1.core.launch.docker.cli import docker_cli
from openenv_v1.core.launch.docker.prune import EnvImage, env_images, remove_env_images
from openenv_v1.core.launch.uv_prepared import CACHE_DIR_VAR, ENVS_DIR, cache_root

__all__ = ["add_cache_parser", "run_cache"]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> float:
    """Seconds in `text`: a number and a unit (s, m, h, d, w), e.g. `30d`."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number and a unit (s, m, h, d, w), "
            "e.g. 30d or 12h"
        )
    return float(match[1]) * _UNITS[match[2]]


def add_cache_parser(commands: argparse._SubParsersAction) -> None:
    """Register `cache` and its `list` and `prune` actions."""
    cache = commands.add_parser(
        "cache",
        help="list or prune prepared environments and env images",
        description=(
            "List (the default) or prune the prepared environments of UV-launched env "
            f"servers (under ${CACHE_DIR_VAR}, default ~/.cache/openenv-v1; a launch "
            f"prunes them too, bounded by cache_max_gb or ${MAX_GB_VAR}, default 10) "
            "and the Docker images openenv-v1 built."
        ),
    )
    actions = cache.add_subparsers(dest="cache_action", metavar="ACTION")
    actions.add_parser("list", help="what is there (the default)")
    prune = actions.add_parser(
        "prune",
        help="remove environments and images no running eval uses",
        description=(
            "Remove the environments whose project folder is gone, then, past the "
            "bound, the least recently used. Nothing a running eval uses is removed."
        ),
    )
    which = prune.add_mutually_exclusive_group()
    which.add_argument(
        "--all", action="store_true", help="every environment and image not in use"
    )
    which.add_argument(
        "--older-than",
        type=duration,
        metavar="DURATION",
        help="also environments unused, and images built, longer ago than this "
        "(e.g. 30d, 12h, 90m)",
    )
    prune.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="only environments and images whose name (as listed) starts with NAME",
    )


def run_cache(args: argparse.Namespace) -> int:
    """List or prune as `args` say; 0, or 2 for a bad `$OPENENV_V1_CACHE_MAX_GB`."""
    try:
        bound = cache_bound()
    except EnvFailure as e:
        print(f"openenv-v1 cache: error: {e}", file=sys.stderr)
        return 2
    if args.cache_action != "prune":
        _print_listing(bound)
        return 0
    names, older_than = tuple(args.names), args.older_than
    removed = prune_prepared_envs(
        everything=args.all,
        older_than_s=older_than,
        max_bytes=None if args.all else bound,
        names=names,
    )
    for env in removed:
        print(f"removed {_env_row(env)}")
    for env in prepared_envs():
        old = older_than is not None and time.time() - env.last_use > older_than
        if env.in_use and _named(env.name, names) and (args.all or old or env.gone):
            print(f"kept {_env_row(env)}")
    images: list[EnvImage] = []
    if args.all or older_than is not None:  # images are kept by default
        cutoff = time.time() - (older_than or 0)
        images = [
            i
            for i in _images()
            if _named(i.tag, names) and (args.all or i.created_at < cutoff)
        ]
    gone = set(remove_env_images(images))
    for image in images:
        print(f"{'removed' if image.tag in gone else 'kept'} {_image_row(image)}")
    freed = sum(e.size for e in removed) + sum(i.size for i in images if i.tag in gone)
    print(f"{len(removed)} environments, {len(gone)} images removed: {_size(freed)}")
    return 0


def _named(name: str, names: tuple[str, ...]) -> bool:
    return not names or name.startswith(names)


def _print_listing(bound: int) -> None:
    envs = prepared_envs()[::-1]
    total = sum(e.size for e in envs)
    print(
        f"prepared environments in {cache_root() / ENVS_DIR}: {len(envs)}, "
        f"{_size(total)} of {_size(bound)}"
    )
    for env in envs:
        print(f"  {_env_row(env)}")
    images = _images()
    print(f"env images built by openenv-v1: {len(images)}, ", end="")
    print(_size(sum(i.size for i in images)))
    for image in images:
        print(f"  {_image_row(image)}")


def _images() -> list[EnvImage]:
    return env_images() if shutil.which(docker_cli()) else []


def _env_row(env: PreparedEnv) -> str:
    gone = env.gone and env.source is not None
    state = ", ".join(s for s, on in (("in use", env.in_use), ("gone", gone)) if on)
    return (
        f"{env.name}  {_size(env.size)}  used {_ago(env.last_use)}  "
        f"{env.source or '(project not recorded)'}{f'  [{state}]' if state else ''}"
    )


def _image_row(image: EnvImage) -> str:
    state = "  [in use]" if image.in_use else ""
    return f"{image.tag}  {_size(image.size)}  built {_ago(image.created_at)}{state}"


def _size(n: float) -> str:
    unit = "B"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            break
        n /= 1000
    return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"


def _ago(t: float) -> str:
    seconds = max(0.0, time.time() - t)
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit]:
            return f"{int(seconds / _UNITS[unit])}{unit} ago"
    return f"{seconds:.0f}s ago"
