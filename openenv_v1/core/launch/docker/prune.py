"""The images this package built (labelled `INPUTS_LABEL`): listed, and an env
folder's old ones pruned after a build (`prune_env_images`: beyond the newest
`keep`). No image a container uses is removed: a running one's is skipped, and
`docker rmi` (never forced) refuses one a stopped container holds. A failure to
prune is logged, never raised: the build it follows succeeded.
"""

from __future__ import annotations

import logging
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from openenv_v1.core.launch.docker.build import INPUTS_LABEL
from openenv_v1.core.launch.docker.cli import call_docker

logger = logging.getLogger(__name__)


def _docker(*args: str) -> subprocess.CompletedProcess[str] | None:
    """`docker <args>`, or None (a warning logged) when Docker cannot be asked."""
    try:
        return call_docker(*args, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        logger.warning("pruning old env images: %s", e)
        return None


def _images_in_use() -> set[str]:
    """Ids of the images running containers were started from."""
    running = _docker("ps", "-q", "--no-trunc")
    ids = running.stdout.split() if running and running.returncode == 0 else []
    if not ids:
        return set()
    images = _docker("inspect", "--format", "{{.Image}}", *ids)
    return set(images.stdout.split()) if images else set()


@dataclass(frozen=True)
class EnvImage:
    """An image this package built: `created` is Docker's RFC 3339 time (UTC)."""

    tag: str
    image_id: str
    created: str
    size: int
    in_use: bool
    """A running container was started from it."""

    @property
    def created_at(self) -> float:
        """`created` as a Unix time."""
        return datetime.fromisoformat(re.sub(r"\.\d+", "", self.created)).timestamp()


def env_images(repository: str | None = None) -> list[EnvImage]:
    """The images this package built (labelled `INPUTS_LABEL`), of `repository` or
    all, newest first; none when Docker cannot be asked."""
    listed = _docker(
        "images",
        "--filter",
        f"label={INPUTS_LABEL}",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        *([repository] if repository else []),
    )
    if listed is None or listed.returncode != 0:
        return []
    tags = sorted({tag for tag in listed.stdout.split() if "<none>" not in tag})
    if not tags:
        return []
    inspected = _docker(
        "image", "inspect", "--format", "{{.Created}} {{.Id}} {{.Size}}", *tags
    )
    if inspected is None or inspected.returncode != 0:
        return []
    in_use = _images_in_use()
    images = [
        EnvImage(tag, image_id, created, int(size), image_id in in_use)
        for tag, (created, image_id, size) in zip(
            tags, (line.split() for line in inspected.stdout.splitlines()), strict=True
        )
    ]
    return sorted(images, key=lambda i: _sortable(i.created), reverse=True)


def remove_env_images(images: Iterable[EnvImage]) -> list[str]:
    """`docker rmi` each of `images` no running container uses; the tags removed."""
    removed = []
    for image in images:
        if image.in_use:
            continue
        result = _docker("rmi", image.tag)
        if result is not None and result.returncode == 0:
            removed.append(image.tag)
        elif result is not None:
            logger.info("kept %s: %s", image.tag, result.stderr.strip())
    return removed


def prune_env_images(repository: str, keep: int) -> list[str]:
    """Remove `repository`'s images beyond the newest `keep`; returns their tags."""
    removed = remove_env_images(env_images(repository)[keep:])
    if removed:
        logger.info("removed old env images: %s", ", ".join(removed))
    return removed


def _sortable(created: str) -> str:
    """Docker's RFC 3339 time with its fraction padded to nanoseconds (Docker drops
    trailing zeros), so that times sort as text."""
    return re.sub(r"(\.\d+)?Z$", lambda m: (m[1] or ".").ljust(10, "0") + "Z", created)
