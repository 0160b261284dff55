"""Prepared environments as a bounded cache: listed, and pruned at launch or on request.

`prune_prepared_envs` removes, of `prepared_envs()` (under `cache_root()/uv-envs`),
those whose project folder is gone, those unused for `older_than_s`, all with
`everything`, then the least recently used while together they exceed `max_bytes`;
only what it can lock exclusively without waiting (one in use is skipped; one an
earlier openenv-v1 made counts as in use for a day). A removed environment is renamed
into `uv-env-trash/` first (no launch sees half of one). Each UV launch calls
`prune_at_launch(max_gb)` in a thread of its own, at most every `PRUNE_EVERY_S`.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.uv_prepared import (
    ENVS_DIR,
    PREPARED_STAMP,
    SIZE_STAMP,
    USE_DIR,
    cache_root,
    disk_usage,
    use_record,
)

__all__ = [
    "MAX_GB_VAR",
    "PreparedEnv",
    "cache_bound",
    "prepared_envs",
    "prune_at_launch",
    "prune_prepared_envs",
]

logger = logging.getLogger(__name__)

MAX_GB_VAR = "OPENENV_V1_CACHE_MAX_GB"
"""Environment variable bounding the prepared environments' size, in GB (where the
`cache_max_gb` setting is unset)."""
DEFAULT_MAX_GB = 10.0
UNRECORDED_GRACE_S = 86400.0
"""An environment an earlier openenv-v1 made (no use record) counts as in use until
unused for this long: that version's evals take no lock."""
TRASH_DIR = "uv-env-trash"
PRUNE_EVERY_S = 3600.0
"""Least seconds between two launches' prunes of one cache."""


@dataclass
class PreparedEnv:
    """One prepared environment: `source` is the project path (or `git+` URL) it was
    made for, None when unrecorded; `last_use` a Unix time."""

    path: Path
    source: str | None
    last_use: float
    in_use: bool

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def gone(self) -> bool:
        """Its project folder no longer exists, or was never recorded."""
        if self.source is None:
            return True
        return not self.source.startswith("git+") and not os.path.isdir(self.source)

    @cached_property
    def size(self) -> int:
        """Bytes on disk: as measured when uv last synced it, else measured now."""
        with contextlib.suppress(OSError, ValueError):
            return int((self.path / SIZE_STAMP).read_text())
        return disk_usage(self.path) if self.path.is_dir() else 0


def prepared_envs() -> list[PreparedEnv]:
    """The prepared environments in the cache, least recently used first."""
    envs_dir = cache_root() / ENVS_DIR
    names = _names(envs_dir) | _names(cache_root() / USE_DIR)
    return sorted((_describe(envs_dir / n) for n in names), key=lambda e: e.last_use)


def prune_prepared_envs(
    *,
    everything: bool = False,
    older_than_s: float | None = None,
    max_bytes: int | None = None,
    names: Sequence[str] = (),
) -> list[PreparedEnv]:
    """Remove what the module docstring says, among the environments whose name
    starts with one of `names` (all without); returns those removed."""
    now = time.time()
    removed: list[PreparedEnv] = []
    kept: list[PreparedEnv] = []
    for env in prepared_envs():
        if names and not env.name.startswith(tuple(names)):
            continue
        old = older_than_s is not None and now - env.last_use > older_than_s
        wanted = not env.in_use and (everything or old or env.gone)
        (removed if wanted and _take_out(env) else kept).append(env)
    if max_bytes is not None:
        total = sum(env.size for env in kept)
        for env in kept:  # least recently used first
            if total <= max_bytes:
                break
            if not env.in_use and _take_out(env):
                removed.append(env)
                total -= env.size
    _empty_trash()
    return removed


def prune_at_launch(max_gb: float | None = None) -> None:
    """A launch's prune, in a thread of its own; a failure is logged, not raised,
    but for a bad `$OPENENV_V1_CACHE_MAX_GB`."""
    bound = cache_bound(max_gb)
    threading.Thread(
        target=_prune_if_due, args=(bound,), name="openenv-v1-cache", daemon=True
    ).start()


def _prune_if_due(bound: int) -> None:
    stamp = cache_root() / USE_DIR / ".pruned"
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        with open(stamp, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # else another prunes
            last = os.fstat(lock.fileno())
            if last.st_size and time.time() - last.st_mtime < PRUNE_EVERY_S:
                return
            for env in prune_prepared_envs(max_bytes=bound):
                logger.info(
                    "removed prepared environment %s (%s)", env.name, env.source
                )
            if not last.st_size:
                lock.write(b"the last prune's time is this file's mtime\n")
                lock.flush()
            os.utime(lock.fileno())
    except BlockingIOError:
        pass
    except OSError as e:
        logger.warning("pruning prepared environments: %s", e)


def cache_bound(max_gb: float | None = None) -> int:
    """Bytes all prepared environments may take: `max_gb` (the `cache_max_gb`
    setting), else `$OPENENV_V1_CACHE_MAX_GB`, else 10 GB."""
    if max_gb is None:
        text = os.environ.get(MAX_GB_VAR, "").strip()
        try:
            max_gb = float(text) if text else DEFAULT_MAX_GB
        except ValueError:
            max_gb = -1.0
        if not max_gb > 0:
            raise EnvFailure(
                f"{MAX_GB_VAR}={text!r} is not a size in GB: set it to a positive "
                "number (e.g. 10), or unset it for the default 10"
            )
    return int(max_gb * 1e9)


def _names(folder: Path) -> set[str]:
    with contextlib.suppress(OSError):
        return {name for name in os.listdir(folder) if not name.startswith(".")}
    return set()


def _describe(env_dir: Path) -> PreparedEnv:
    record = use_record(env_dir)
    try:
        source, last_use = (
            os.fsdecode(record.read_bytes()) or None,
            record.stat().st_mtime,
        )
    except OSError:
        source, last_use = None, 0.0
    in_use = _locked(record)
    if source is None:
        # Made by an earlier openenv-v1: it holds no lock, but restamps each launch.
        for path in (env_dir, env_dir / PREPARED_STAMP):
            with contextlib.suppress(OSError):
                last_use = max(last_use, path.stat().st_mtime)
        in_use = in_use or time.time() - last_use < UNRECORDED_GRACE_S
    return PreparedEnv(env_dir, source, last_use, in_use)


def _locked(record: Path) -> bool:
    """Whether a launch holds the environment of this use record."""
    try:
        fd = os.open(record, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _take_out(env: PreparedEnv) -> bool:
    """Move `env` into the trash and drop its record, if no launch holds it and none
    used it since it was listed."""
    record = use_record(env.path)
    trash = cache_root() / TRASH_DIR
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        with open(record, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.fstat(lock.fileno())
            lock.seek(0)
            source = os.fsdecode(lock.read()) or None
            if os.stat(record).st_ino != held.st_ino or source != env.source:
                return False
            if source is not None and held.st_mtime != env.last_use:
                return False
            if env.path.exists() and env.size >= 0:  # measured before it moves
                trash.mkdir(exist_ok=True)
                env.path.rename(trash / f"{env.name}-{uuid.uuid4().hex[:8]}")
            record.unlink()
    except OSError:  # BlockingIOError included: a running eval holds it
        return False
    return True


def _empty_trash() -> None:
    trash = cache_root() / TRASH_DIR
    for name in _names(trash):
        shutil.rmtree(trash / name, ignore_errors=True)
