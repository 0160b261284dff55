"""The local git repo dm_control_env's `openenv @ git+https://github.com/<owner>/
OpenEnv.git` dependency is taken from (`recipes.py`: git's `insteadOf`, by
environment variables only), since GitHub is not reachable here."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from compatibility.recipe_parts import cache_dir

__all__ = ["REPO_VAR", "local_openenv_repo", "locked_commit", "openenv_git_url"]

REPO_VAR = "OPENENV_GIT_REPO"
"""A clone of huggingface/OpenEnv with its history, for a lock that pins a commit."""

# The repository OpenEnv's envs take openenv from when they name it by git URL: it
# moved from meta-pytorch/OpenEnv to huggingface/OpenEnv; older checkouts name the
# first.
_GIT_URL = re.compile(r"git\+(https://github\.com/[\w.-]+/OpenEnv\.git)")
_LOCKED = re.compile(r"github\.com/[\w.-]+/OpenEnv\.git(?:\?[^#\"]*)?#([0-9a-f]{40})")
_QUIET_GIT = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def openenv_git_url(env_dir: Path) -> str:
    """The OpenEnv git URL the env's `pyproject.toml` depends on (the one its
    checkout's repository had then), for git to take from a local repo instead."""
    found = _GIT_URL.search((env_dir / "pyproject.toml").read_text())
    if found is None:
        raise RuntimeError(
            f"{env_dir / 'pyproject.toml'} names no git+https://github.com/"
            "<owner>/OpenEnv.git dependency to take from the local tree"
        )
    return found.group(1)


def locked_commit(env_dir: Path) -> str | None:
    """The OpenEnv commit the env's `uv.lock` pins, if it has a lock that pins one
    (uv fetches exactly that commit, whatever the repo's HEAD)."""
    lock = env_dir / "uv.lock"
    found = _LOCKED.search(lock.read_text()) if lock.is_file() else None
    return found.group(1) if found else None


def local_openenv_repo(env_dir: Path) -> Path:
    """A local git repo to take the env's OpenEnv dependency from: one that has the
    commit its lock pins (`$OPENENV_GIT_REPO`, else the OpenEnv tree the env is in),
    or, with no pinned commit, the tree's package files committed afresh. A pinned
    commit that no such repo has is a RuntimeError naming it and `OPENENV_GIT_REPO`."""
    tree = env_dir.resolve().parent.parent
    if not (tree / "src" / "openenv").is_dir():
        raise RuntimeError(f"{env_dir} is not in an OpenEnv checkout (no src/openenv)")
    commit = locked_commit(env_dir)
    if commit is None:
        return _fresh_repo(tree)
    candidates = [Path(p) for p in [os.environ.get(REPO_VAR)] if p] + [tree]
    for repo in candidates:
        if _has_commit(repo, commit):
            return repo.resolve()
    tried = ", ".join(str(p) for p in candidates)
    raise RuntimeError(
        f"{env_dir / 'uv.lock'} pins openenv at commit {commit} of "
        f"{openenv_git_url(env_dir)}, which no local git repo here has (tried: "
        f"{tried}; a snapshot without history lacks it): set {REPO_VAR} to a clone "
        "of that repository with its history"
    )


def _has_commit(repo: Path, commit: str) -> bool:
    check = ["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"]
    env = {**os.environ, **_QUIET_GIT}
    return subprocess.run(check, env=env, capture_output=True).returncode == 0


def _fresh_repo(tree: Path) -> Path:
    """A git repo of `tree`'s package files, committed afresh (a checkout may lack
    objects of its own history); one per tree content, so a newer checkout gets its
    own."""
    digest = hashlib.sha256((tree / "pyproject.toml").read_bytes())
    for path in sorted((tree / "src").rglob("*.py")):
        digest.update(f"{path.relative_to(tree)}:{path.stat().st_size}".encode())
    repo = cache_dir() / f"openenv-git-{digest.hexdigest()[:12]}"
    if (repo / ".git").is_dir():
        return repo
    repo.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
        if (tree / name).is_file():
            shutil.copy2(tree / name, repo / name)
    shutil.copytree(tree / "src", repo / "src", dirs_exist_ok=True)
    env = {**os.environ, **_QUIET_GIT}
    env |= {"GIT_AUTHOR_NAME": "compat", "GIT_AUTHOR_EMAIL": "compat@local"}
    env |= {"GIT_COMMITTER_NAME": "compat", "GIT_COMMITTER_EMAIL": "compat@local"}
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "OpenEnv tree for dm_control_env"],
    ):
        subprocess.run(cmd, cwd=repo, env=env, check=True)
    return repo
