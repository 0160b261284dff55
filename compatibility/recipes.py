"""Recipes for OpenEnv envs that need more than their own folder (issue 28).

`compatibility/run.py` takes each env's check/eval spec from here when there is one
(`SPECS`, the keyword arguments of its `EnvSpec`) and, before the env's runs,
`prepared(env, env_dir)` makes what the env needs: the registry parts installed by
this script (PyPI packages into a folder of their own, given through `PYTHONPATH`),
the small data sets written here (`compatibility/data/`), stand-in servers started
on 127.0.0.1 and stopped after. Nothing in the env's folder is changed.

- openspiel_env: PyPI `open_spiel` (its manylinux wheel) installed with
  `uv pip install --target DIR --python <this interpreter>`, on `PYTHONPATH`;
  `OPENSPIEL_GAME=catch` (the eval: a ball falls for 9 steps, the paddle stays).
- tbench2_env: `TB2_TASKS_DIR` at a fresh copy of `compatibility/data/tbench2` (one
  task, `fix-add`: a bug in `add.py`, a pytest test) in local mode, instead of the
  Terminal-Bench 2 repository it downloads at reset; PyPI `pip` and `pytest` on
  `PYTHONPATH` (its terminal installs pytest with `python -m pip` at reset, and a uv
  venv has no pip). In Docker both folders are mounted (`docker_run_args` `-v`).
- agent_world_model_env: `AWM_DATA_DIR` at `compatibility/data/agent_world_model`
  (in Docker: mounted read-only at its image's `/data/awm`)
  (one scenario, `notes`: its FastAPI service, schema, rows and task, in AWM's seven
  JSONL files; no verifier), instead of Snowflake/AgentWorldModel-1K on Hugging
  Face. Its tools exist only once `reset` has started the scenario's service.
- dm_control_env: its `openenv[core] @ git+https://github.com/huggingface/OpenEnv.git`
  (`openenv-core @ git+https://github.com/meta-pytorch/OpenEnv.git` before the move)
  taken from a local git repo, by environment variables only (`GIT_CONFIG_COUNT=1`,
  `GIT_CONFIG_KEY_0=url.file://REPO.insteadOf`, `GIT_CONFIG_VALUE_0=<that URL>`).
  Where its `uv.lock` pins a commit (385de5eb pins 2ef91f62), REPO is a clone that
  has it: `$OPENENV_GIT_REPO`, else the OpenEnv tree the env is in, if it is a git
  clone with that commit; with neither, the error says so. Without a lock (685de41),
  REPO is the tree's package files committed afresh, and
  `UV_EXCLUDE_NEWER=2026-11-01T00:00:00Z` (mujoco 4.0.0 breaks dm_control 1.0.50).
  `MUJOCO_GL=disable`.
- browsergym_env: Debian's `chromium` (installed here with `apt-get update` and
  `apt-get install -y chromium` when it is missing and this is root; else an error
  naming that command), found by Playwright 1.44 through a browsers folder in its own layout
  (`PLAYWRIGHT_BROWSERS_PATH=DIR`, `DIR/chromium-1117/chrome-linux/chrome` a link to
  `/usr/lib/chromium/chromium`); MiniWoB's pages from PyPI `miniwob` 1.1.0 (its
  `miniwob/html/`) served on 127.0.0.1 as `MINIWOB_URL`;
  `BROWSERGYM_TASK_NAME=click-test`.
- git_env: a Gitea stand-in (`gitea_standin.py`: `GET /`, the repo list API and
  `git http-backend` for clones, over one bare repo it makes, `hello-world`) on a
  free port, as `GITEA_URL`; the server's `HOME` a folder of its own, since git_env
  writes `~/.gitconfig` and `~/.git-credentials` (uv's cache and Pythons stay put).
  In Docker, a bridge network of its own (`provider_kwargs.network`, inter-container
  traffic off) with the stand-in listening on that bridge's gateway address.
- finqa_env: `FINQA_DATA_PATH` at `compatibility/data/finqa` (one question, one
  company table, in FinQA's layout), instead of the FinQA data on Hugging Face.

The folders made are kept under `$OPENENV_V1_CACHE_DIR/compat` (else
`~/.cache/openenv-v1/compat`), so a second run installs nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from compatibility.recipe_openenv_git import local_openenv_repo, openenv_git_url
from compatibility.recipe_parts import (
    DEBIAN_CHROMIUM,
    Prepared,
    background,
    cache_dir,
    docker_network,
    ensure_chromium,
    free_port,
    mounts,
    pip_target,
    uv_dirs,
    writable_by_all,
)
from compatibility.recipe_specs import DATA, SPECS

__all__ = ["DATA", "SPECS", "Prepared", "RecipeFailed", "prepared"]

HERE = Path(__file__).resolve().parent


def _agent_world_model(env_dir: Path, docker: bool) -> Prepared:
    data = DATA / "agent_world_model"
    if not docker:
        return Prepared(env_vars={"AWM_DATA_DIR": str(data)})
    # Its image's AWM_DATA_DIR, /data/awm (a VOLUME), read-only.
    return Prepared(
        env_vars={"AWM_DATA_DIR": "/data/awm"},
        provider_kwargs=mounts([f"{data}:/data/awm:ro"]),
        notes=["Docker: the data set mounted read-only at its /data/awm (`-v`)"],
    )


def _openspiel(env_dir: Path, docker: bool) -> Prepared:
    target = pip_target("open_spiel", "open_spiel==2.0.2")
    return Prepared(env_vars={"PYTHONPATH": str(target)})


def _tbench2(env_dir: Path, docker: bool) -> Prepared:
    # The task's folder is the terminal's working directory: a fresh copy, so the
    # eval's fix never lands in this repo.
    tasks = cache_dir() / "tbench2-tasks"
    shutil.rmtree(tasks, ignore_errors=True)
    shutil.copytree(DATA / "tbench2", tasks)
    runs = cache_dir() / "tbench2-runs"
    # Its terminal runs `python -m pip install pytest` at reset, and a uv venv has no
    # pip: both from PyPI on PYTHONPATH.
    tools = pip_target("tbench2-tools", "pip", "pytest")
    if docker:
        # The container runs as uid 65534: the task's copy is writable by all. Its
        # image puts the env on PYTHONPATH (/app/env): kept, the tools after it.
        writable_by_all(tasks)
        volumes = [f"{tasks}:/compat/tbench2-tasks", f"{tools}:/compat/tools:ro"]
        return Prepared(
            env_vars={
                "TB2_TASKS_DIR": "/compat/tbench2-tasks",
                "TB2_OUTPUT_DIR": "/tmp/tbench2-runs",
                "PYTHONPATH": "/app/env:/compat/tools",
            },
            provider_kwargs=mounts(volumes),
            notes=["Docker: the task set and tools mounted (`-v`)"],
        )
    return Prepared(
        env_vars={
            "TB2_TASKS_DIR": str(tasks),
            "TB2_OUTPUT_DIR": str(runs),
            "PYTHONPATH": str(tools),
        }
    )


# mujoco 4.0.0 (later) breaks dm_control 1.0.50: for a tree whose dm_control_env has
# no uv.lock (685de41); one with a lock (385de5eb: mujoco 3.8.0) keeps its pins.
DM_CONTROL_EXCLUDE_NEWER = "2026-11-01T00:00:00Z"


def _dm_control(env_dir: Path, docker: bool) -> Prepared:
    """dm_control_env depends on `openenv[core] @ git+https://github.com/...`
    (`openenv-core` before the move): git is told (environment variables only) to
    take that URL from a local git repo (`recipe_openenv_git.local_openenv_repo`)."""
    redirect = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.file://{local_openenv_repo(env_dir)}.insteadOf",
        "GIT_CONFIG_VALUE_0": openenv_git_url(env_dir),
    }
    if not (env_dir / "uv.lock").is_file():
        redirect["UV_EXCLUDE_NEWER"] = DM_CONTROL_EXCLUDE_NEWER
    return Prepared(env_vars=dict(redirect), environ=dict(redirect))


@contextlib.contextmanager
def _git(env_dir: Path, docker: bool) -> Iterator[Prepared]:
    work = cache_dir() / "git"
    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    port = free_port()
    standin = [sys.executable, str(HERE / "gitea_standin.py")]
    standin += ["--root", str(work / "repos"), "--port", str(port)]
    login = {"GITEA_USERNAME": "openenv", "GITEA_PASSWORD": "openenv"}
    if docker:
        # The container must reach the stand-in: a network of this run's own, the
        # stand-in on its gateway (this host's address on that bridge only).
        with docker_network(f"openenv-v1-compat-git-{os.getpid()}") as (name, gate):
            url = f"http://{gate}:{port}"
            with background(standin + ["--host", gate], f"{url}/", work / "log"):
                yield Prepared(
                    env_vars={"GITEA_URL": url, **login},
                    provider_kwargs={"network": name},
                    notes=[
                        f"Docker: on a network of the recipe's own ({name}: a bridge, "
                        "inter-container traffic off), the stand-in on its gateway"
                    ],
                )
        return
    with background(standin, f"http://127.0.0.1:{port}/", work / "standin.log"):
        yield Prepared(
            env_vars={
                "GITEA_URL": f"http://127.0.0.1:{port}",
                **login,
                "WORKSPACE_DIR": str(work / "workspace"),
                # git_env writes ~/.gitconfig and ~/.git-credentials: not ours. uv
                # (which runs the server) keeps its cache and Pythons where they are.
                "HOME": str(work / "home"),
                **uv_dirs(),
            }
        )


PLAYWRIGHT_CHROMIUM = "chromium-1117"
"""The browser build Playwright 1.44 (browsergym_env's pin) looks for."""


@contextlib.contextmanager
def _browsergym(env_dir: Path, docker: bool) -> Iterator[Prepared]:
    """Debian's chromium where Playwright looks for its own build, and MiniWoB's
    pages (PyPI `miniwob`'s `miniwob/html/`) served on 127.0.0.1."""
    notes = ensure_chromium()
    browsers = cache_dir() / "playwright-browsers"
    chrome = browsers / PLAYWRIGHT_CHROMIUM / "chrome-linux" / "chrome"
    if not chrome.exists():
        chrome.parent.mkdir(parents=True, exist_ok=True)
        chrome.symlink_to(DEBIAN_CHROMIUM)
    pages = pip_target("miniwob", "--no-deps", "miniwob==1.1.0") / "miniwob" / "html"
    port = free_port()
    server = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1"]
    server += ["--directory", str(pages), str(port)]
    url = f"http://127.0.0.1:{port}/miniwob/"
    with background(server, url, cache_dir() / "miniwob-server.log"):
        yield Prepared(
            env_vars={
                "BROWSERGYM_TASK_NAME": "click-test",
                "MINIWOB_URL": url,
                "PLAYWRIGHT_BROWSERS_PATH": str(browsers),
            },
            notes=notes,
        )


_PREPARE = {
    "agent_world_model_env": _agent_world_model,
    "openspiel_env": _openspiel,
    "tbench2_env": _tbench2,
    "git_env": _git,
    "dm_control_env": _dm_control,
    "browsergym_env": _browsergym,
}


class RecipeFailed(Exception):
    """What an env needs could not be made here; the message says what and why."""


@contextlib.contextmanager
def prepared(env: str, env_dir: Path, docker: bool = False) -> Iterator[Prepared]:
    """What `env` needs for its runs (in a container built from its Dockerfile when
    `docker`); stand-in servers it starts stop on exit. A preparation that fails
    (its error, a stand-in that does not come up) is `RecipeFailed`, raised before
    the body runs."""
    prepare = _PREPARE.get(env)
    if prepare is None:
        yield Prepared()
        return
    with contextlib.ExitStack() as stack:
        try:
            result = prepare(env_dir, docker)
            if isinstance(result, contextlib.AbstractContextManager):
                result = stack.enter_context(result)
        except (OSError, RuntimeError, subprocess.CalledProcessError) as e:
            raise RecipeFailed(f"{type(e).__name__}: {e}") from e
        yield result
