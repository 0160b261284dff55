"""The prepared environment a UV-launched env server runs from, and its use record.

Each env project gets one environment of its own, outside the project, that uv keeps
in sync (`prepared_env_dir`, under `cache_root()`). Once a server from it is ready it
is stamped (`mark_prepared`), and a later launch of the unchanged project runs its
uvicorn directly (`prepared_uvicorn`). A launch holds it (`hold_prepared_env`) until
its server stops: a shared `flock` on its use record, `uv-env-use/<name>`, which names
the project and whose mtime is its last use (beside `uv-envs/`: uv refuses a folder
holding anything but an environment). `cache` prunes only what it locks exclusively.

Imports nothing of the package.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from pathlib import Path
from typing import BinaryIO

CACHE_DIR_VAR = "OPENENV_V1_CACHE_DIR"
# Stamps of a prepared environment: the project's `fingerprint()`, and its size.
PREPARED_STAMP = ".openenv-v1-prepared"
SIZE_STAMP = ".openenv-v1-size"
ENVS_DIR, USE_DIR = "uv-envs", "uv-env-use"
"""Folders of `cache_root()`: the environments, and their use records."""
_ENV_INPUTS = ("pyproject.toml", "uv.lock", ".python-version")


def cache_root() -> Path:
    """`$OPENENV_V1_CACHE_DIR`, else `$XDG_CACHE_HOME/openenv-v1` (`~/.cache/openenv-v1`)."""
    return Path(
        os.environ.get(CACHE_DIR_VAR)
        or os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
            "openenv-v1",
        )
    )


def prepared_env_dir(source: str, name: str) -> Path:
    """Where the prepared environment of the project at `source` (its absolute path,
    or `git+` URL) lives."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "env"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return cache_root() / ENVS_DIR / f"{slug}-{digest}"


def use_record(env_dir: Path) -> Path:
    """The use record of the prepared environment `env_dir` (module docstring)."""
    return env_dir.parent.parent / USE_DIR / env_dir.name


def hold_prepared_env(env_dir: Path, source: str) -> BinaryIO | None:
    """Hold `env_dir` in use until `release_prepared_env` (a shared lock on its use
    record, made to name `source`, touched); None when the cache cannot be written."""
    record = use_record(env_dir)
    with contextlib.suppress(OSError):
        record.parent.mkdir(parents=True, exist_ok=True)
        while True:
            held = open(record, "a+b")  # closed by release_prepared_env
            fcntl.flock(held, fcntl.LOCK_SH)
            # A pruner may have removed the record while this waited for its lock.
            with contextlib.suppress(OSError):
                if os.stat(record).st_ino == os.fstat(held.fileno()).st_ino:
                    break
            held.close()
        held.seek(0)
        if held.read() != os.fsencode(source):
            held.truncate(0)
            held.write(os.fsencode(source))
            held.flush()
        os.utime(held.fileno())
        return held
    return None


def release_prepared_env(held: BinaryIO | None) -> None:
    """Record the last use of the environment `held` holds, and let it go."""
    if held is not None and not held.closed:
        with contextlib.suppress(OSError):
            os.utime(held.fileno())
        held.close()


def prepared_uvicorn(env_dir: Path, project: Path) -> Path | None:
    """The prepared environment's uvicorn, when uv synced `env_dir` for `project`'s
    current files (`mark_prepared`)."""
    uvicorn = env_dir / "bin" / "uvicorn"
    with contextlib.suppress(OSError):
        stamp = (env_dir / PREPARED_STAMP).read_text()
        if stamp == fingerprint(project) and uvicorn.is_file():
            return uvicorn
    return None


def mark_prepared(env_dir: Path, project: Path) -> None:
    """Stamp `env_dir` as synced for `project`'s current files, and its size."""
    stamp = env_dir / PREPARED_STAMP
    with contextlib.suppress(OSError):
        current, size = fingerprint(project), env_dir / SIZE_STAMP
        if not size.is_file() or not stamp.is_file() or stamp.read_text() != current:
            size.write_text(str(disk_usage(env_dir)))
            stamp.write_text(current)


def disk_usage(path: Path) -> int:
    """Bytes `path`'s files take on disk, each hard-linked file counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(folder, name))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def fingerprint(project: Path) -> str:
    """The project's location and the files uv installs it from."""
    digest = hashlib.sha256(str(project).encode())
    for name in _ENV_INPUTS:
        with contextlib.suppress(OSError):
            digest.update(name.encode() + (project / name).read_bytes())
    return digest.hexdigest()
