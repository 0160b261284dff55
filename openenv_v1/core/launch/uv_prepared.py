"""The prepared environment a UV-launched env server runs from.

Each env project gets one environment of its own, outside the project, that uv keeps
in sync with the project and its lock (`prepared_env_dir`: under
`$OPENENV_V1_CACHE_DIR`, else `$XDG_CACHE_HOME/openenv-v1`). Once a server launched
through `uv run` from it is ready, the environment is stamped with a fingerprint of
the project (`mark_prepared`); a later launch of an unchanged project runs that
environment's uvicorn directly (`prepared_uvicorn`), skipping uv's check.

Imports nothing of the package.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
from pathlib import Path

CACHE_DIR_VAR = "OPENENV_V1_CACHE_DIR"
# Written into a prepared environment once a server launched through `uv run` from
# it is ready; holds `fingerprint()` of the project it was synced for.
_PREPARED_STAMP = ".openenv-v1-prepared"
_ENV_INPUTS = ("pyproject.toml", "uv.lock", ".python-version")


def prepared_env_dir(source: str, name: str) -> Path:
    """Where the prepared environment of the env project at `source` (its absolute
    path, or its `git+` URL) lives: under `$OPENENV_V1_CACHE_DIR`, else
    `$XDG_CACHE_HOME/openenv-v1` (`~/.cache/openenv-v1`)."""
    root = os.environ.get(CACHE_DIR_VAR) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "openenv-v1",
    )
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "env"
    digest = hashlib.sha256(source.encode()).hexdigest()[:12]
    return Path(root) / "uv-envs" / f"{slug}-{digest}"


def prepared_uvicorn(env_dir: Path, project: Path) -> Path | None:
    """The prepared environment's uvicorn, when uv synced `env_dir` for `project`'s
    current files (`mark_prepared`): a repeated launch then runs it directly instead
    of asking uv to check the environment again."""
    uvicorn = env_dir / "bin" / "uvicorn"
    with contextlib.suppress(OSError):
        stamp = (env_dir / _PREPARED_STAMP).read_text()
        if stamp == fingerprint(project) and uvicorn.is_file():
            return uvicorn
    return None


def mark_prepared(env_dir: Path, project: Path) -> None:
    """Stamp `env_dir` as synced for `project`'s current files (best effort)."""
    with contextlib.suppress(OSError):
        (env_dir / _PREPARED_STAMP).write_text(fingerprint(project))


def fingerprint(project: Path) -> str:
    """What the prepared environment depends on: the project's location and the
    files uv resolves and installs it from."""
    digest = hashlib.sha256(str(project).encode())
    for name in _ENV_INPUTS:
        with contextlib.suppress(OSError):
            digest.update(name.encode() + (project / name).read_bytes())
    return digest.hexdigest()
