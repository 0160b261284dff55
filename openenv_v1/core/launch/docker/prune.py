"""Old images of an env folder go when a new one is built.

Each edit of an env folder builds a new image, `openenv-v1/<folder>:<hash>`, and the
old ones stay (an env image is often a gigabyte). After a build,
`prune_env_images(repository, keep)` removes the images of that repository built by
this package (they carry `org.openenv-v1.inputs`) beyond the newest `keep`, except any
image a container uses: a running one's is never touched, and `docker rmi` (never
forced) refuses an image a stopped container still holds. A failure to prune is
logged, never raised: the build it follows succeeded.

    prune_env_images("openenv-v1/maze_env", keep=3)
"""

from __future__ import annotations

import logging
import re
import subprocess

from openenv_v1.core.launch.docker.build import INPUTS_LABEL
from openenv_v1.core.launch.docker.cli import docker_cli

logger = logging.getLogger(__name__)


def _docker(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            [docker_cli(), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
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


def prune_env_images(repository: str, keep: int) -> list[str]:
    """Remove `repository`'s images built by this package beyond the newest `keep`
    (see the module docstring); returns the tags removed."""
    listed = _docker(
        "images",
        "--no-trunc",
        "--filter",
        f"label={INPUTS_LABEL}",
        "--format",
        "{{.Repository}}:{{.Tag}}",
        repository,
    )
    if listed is None or listed.returncode != 0:
        return []
    tags = sorted(set(listed.stdout.split()))
    if len(tags) <= keep:
        return []
    inspected = _docker("image", "inspect", "--format", "{{.Created}} {{.Id}}", *tags)
    if inspected is None or inspected.returncode != 0:
        return []
    created = [line.split() for line in inspected.stdout.splitlines()]
    by_age = sorted(
        zip(tags, created, strict=True), key=lambda t: _sortable(t[1][0]), reverse=True
    )
    in_use = _images_in_use()
    removed = []
    for tag, (_, image_id) in by_age[keep:]:
        if image_id in in_use:
            continue
        result = _docker("rmi", tag)
        if result is not None and result.returncode == 0:
            removed.append(tag)
        elif result is not None:
            logger.info("kept %s: %s", tag, result.stderr.strip())
    if removed:
        logger.info("removed old env images: %s", ", ".join(removed))
    return removed


def _sortable(created: str) -> str:
    """Docker's RFC 3339 creation time (UTC) with its fraction padded to nanoseconds,
    so that times sort as text (Docker drops trailing zeros: `.5Z` is `.500000000Z`)."""
    return re.sub(r"(\.\d+)?Z$", lambda m: (m[1] or ".").ljust(10, "0") + "Z", created)
