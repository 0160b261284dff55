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
  venv has no pip).
- agent_world_model_env: `AWM_DATA_DIR` at `compatibility/data/agent_world_model`
  (one scenario, `notes`: its FastAPI service, schema, rows and task, in AWM's seven
  JSONL files; no verifier), instead of Snowflake/AgentWorldModel-1K on Hugging
  Face. Its tools exist only once `reset` has started the scenario's service.
- dm_control_env: its `openenv-core @ git+https://github.com/meta-pytorch/OpenEnv.git`
  taken from a local git repo of the OpenEnv tree the env is in, by environment
  variables only (`GIT_CONFIG_COUNT=1`, `GIT_CONFIG_KEY_0=url.file://REPO.insteadOf`,
  `GIT_CONFIG_VALUE_0=<that URL>`); `UV_EXCLUDE_NEWER=2026-11-01T00:00:00Z` (mujoco
  4.0.0 breaks dm_control 1.0.50); `MUJOCO_GL=disable`.
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
- finqa_env: `FINQA_DATA_PATH` at `compatibility/data/finqa` (one question, one
  company table, in FinQA's layout), instead of the FinQA data on Hugging Face.

The folders made are kept under `$OPENENV_V1_CACHE_DIR/compat` (else
`~/.cache/openenv-v1/compat`), so a second run installs nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"


def _j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _call(tool: str, **arguments: Any) -> str:
    return _j({"tool_name": tool, "arguments": arguments})


def cache_dir() -> Path:
    base = os.environ.get("OPENENV_V1_CACHE_DIR") or os.path.expanduser(
        "~/.cache/openenv-v1"
    )
    path = Path(base) / "compat"
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Prepared:
    """What a recipe adds to an env's runs."""

    env_vars: dict[str, str] = field(default_factory=dict)
    """For the env server (`provider_kwargs.env_vars`)."""
    environ: dict[str, str] = field(default_factory=dict)
    """For the check and eval processes (and so uv, when it prepares the env)."""
    provider_kwargs: dict[str, Any] = field(default_factory=dict)
    """More launch options (Docker: mounts through `docker_run_args`)."""
    notes: list[str] = field(default_factory=list)


SPECS: dict[str, dict[str, Any]] = {
    "openspiel_env": {
        "docker_skip": "its Dockerfile builds FROM "
        "ghcr.io/meta-pytorch/openenv-openspiel-base (OpenSpiel built from source), "
        "an image no registry reachable here has",
        "action": _j({"action_id": 1}),
        "script": [_j({"action_id": 1})] * 10,
        "max_turns": 12,
        "env_vars": {"OPENSPIEL_GAME": "catch"},
        "note": "PyPI open_spiel installed by compatibility/recipes.py on "
        "PYTHONPATH; OPENSPIEL_GAME=catch",
    },
    "finqa_env": {
        "docker_skip": "its Dockerfile downloads the FinQA data from Hugging Face "
        "while building (`RUN ... snapshot_download('snorkelai/finqa-data')`)",
        "action": _call("get_descriptions", company_name="alphabet"),
        "script": [
            _call("get_descriptions", company_name="alphabet"),
            _call(
                "sql_query",
                company_name="alphabet",
                table_name="income_statement",
                query='SELECT "2023", "2022" FROM income_statement '
                "WHERE item = 'Total revenues'",
            ),
            _call("submit_answer", answer="8.7%"),
        ],
        "max_turns": 4,
        "env_vars": {"FINQA_DATA_PATH": str(DATA / "finqa")},
        "note": "a one-question data set written here (compatibility/data/finqa)",
    },
    "agent_world_model_env": {
        "reset": {"scenario": "notes", "task_idx": 0},
        "action": _call("list_notes"),
        # Its `done` and `verify` tools are not in its tool list, so a model is never
        # offered them (and the adapter refuses unlisted tools): `max_turns` ends it.
        "script": [_call("list_notes"), _call("mark_done", note_id=2)],
        "max_turns": 2,
        "note": "a one-scenario data set written here "
        "(compatibility/data/agent_world_model: a notes service); its tools appear "
        "at reset",
    },
    "git_env": {
        "action": _j({"action_type": "list_repos"}),
        "script": [
            _j({"action_type": "list_repos"}),
            _j({"action_type": "clone_repo", "repo_name": "hello-world"}),
            _j(
                {
                    "action_type": "execute_git_command",
                    "command": "log --oneline",
                    "working_dir": "hello-world",
                }
            ),
        ],
        "max_turns": 3,
        "note": "Gitea stand-in (compatibility/gitea_standin.py: its repo API and "
        "`git http-backend`); the server's HOME a folder of its own (git_env writes "
        "~/.gitconfig and ~/.git-credentials); no reward or done by design",
    },
    "dm_control_env": {
        "reset": {"seed": 1},
        "action": _j({"values": [0.5]}),
        "script": [_j({"values": [0.5]}), _j({"values": [-0.5]})],
        "max_turns": 3,
        "env_vars": {"MUJOCO_GL": "disable"},
        "note": "its openenv-core from GitHub redirected to a local git repo of the "
        "OpenEnv tree (GIT_CONFIG_*); UV_EXCLUDE_NEWER=2026-11-01 (mujoco 4.0.0 "
        "breaks dm_control 1.0.50); MUJOCO_GL=disable (no pixels); cartpole balance "
        "runs 1000 steps: `max_turns`",
    },
    "browsergym_env": {
        "docker_skip": "its Dockerfile builds FROM "
        "mcr.microsoft.com/playwright/python:v1.44.0-jammy (no registry reachable "
        "here has it), runs `playwright install chromium` (a browser download) and "
        "fetches MiniWoB from GitHub",
        "action": _j({"action_str": "noop()"}),
        # click-test's button is bid 13 in its accessibility tree.
        "script": [_j({"action_str": "click('13')"})],
        "max_turns": 2,
        "step_timeout": 150.0,
        "note": "Debian chromium as Playwright's chromium-1117; MiniWoB pages from "
        "PyPI miniwob 1.1.0 served on 127.0.0.1; BROWSERGYM_TASK_NAME=click-test",
    },
    "tbench2_env": {
        "action": _j({"action_type": "exec", "command": "cat add.py"}),
        "script": [
            _j({"action_type": "exec", "command": "sed -i 's/a - b/a + b/' add.py"}),
            _j({"action_type": "evaluate"}),
        ],
        "max_turns": 3,
        "env_vars": {"TB2_DEFAULT_TASK_ID": "fix-add", "TB2_MODE": "local"},
        "note": "a one-task set written here (compatibility/data/tbench2), copied "
        "fresh for each run; local mode (no Docker per task)",
    },
}


def _pip_target(name: str, *packages: str) -> Path:
    """`packages` installed from PyPI into a folder of their own (once)."""
    target = cache_dir() / name
    marker = target / ".installed"
    if marker.exists():
        return target
    subprocess.run(
        ["uv", "pip", "install", "--quiet", "--target", str(target)]
        + ["--python", sys.executable, *packages],
        check=True,
    )
    marker.write_text(" ".join(packages))
    return target


def _mounts(volumes: list[str]) -> dict[str, Any]:
    """`provider_kwargs` mounting each `HOST:CONTAINER[:ro]` into the container."""
    return {"docker_run_args": [arg for v in volumes for arg in ("-v", v)]}


def _writable_by_all(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        path.chmod(path.stat().st_mode | (0o777 if path.is_dir() else 0o666))


def _agent_world_model(env_dir: Path, docker: bool) -> Prepared:
    data = DATA / "agent_world_model"
    if not docker:
        return Prepared(env_vars={"AWM_DATA_DIR": str(data)})
    # Its image's AWM_DATA_DIR, /data/awm (a VOLUME), read-only.
    return Prepared(
        env_vars={"AWM_DATA_DIR": "/data/awm"},
        provider_kwargs=_mounts([f"{data}:/data/awm:ro"]),
        notes=["Docker: the data set mounted read-only at its /data/awm (`-v`)"],
    )


def _openspiel(env_dir: Path, docker: bool) -> Prepared:
    target = _pip_target("open_spiel", "open_spiel==2.0.2")
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
    tools = _pip_target("tbench2-tools", "pip", "pytest")
    if docker:
        # The container runs as uid 65534: the task's copy is writable by all. Its
        # image puts the env on PYTHONPATH (/app/env): kept, the tools after it.
        _writable_by_all(tasks)
        mounts = [f"{tasks}:/compat/tbench2-tasks", f"{tools}:/compat/tools:ro"]
        return Prepared(
            env_vars={
                "TB2_TASKS_DIR": "/compat/tbench2-tasks",
                "TB2_OUTPUT_DIR": "/tmp/tbench2-runs",
                "PYTHONPATH": "/app/env:/compat/tools",
            },
            provider_kwargs=_mounts(mounts),
            notes=["Docker: the task set and tools mounted (`-v`)"],
        )
    return Prepared(
        env_vars={
            "TB2_TASKS_DIR": str(tasks),
            "TB2_OUTPUT_DIR": str(runs),
            "PYTHONPATH": str(tools),
        }
    )


OPENENV_GIT = "https://github.com/meta-pytorch/OpenEnv.git"
# mujoco 4.0.0 (later) breaks dm_control 1.0.50.
DM_CONTROL_EXCLUDE_NEWER = "2026-11-01T00:00:00Z"


def _dm_control(env_dir: Path, docker: bool) -> Prepared:
    """dm_control_env depends on `openenv-core @ git+https://github.com/...`: git is
    told (environment variables only) to take that URL from a local git repo of the
    OpenEnv tree the env folder is in: its package files, committed afresh (a
    checkout may lack objects of its own history)."""
    tree = env_dir.resolve().parent.parent
    if not (tree / "src" / "openenv").is_dir():
        raise RuntimeError(f"{env_dir} is not in an OpenEnv checkout (no src/openenv)")
    repo = cache_dir() / "openenv-core-git"
    if not (repo / ".git").is_dir():
        repo.mkdir(parents=True, exist_ok=True)
        for name in ("pyproject.toml", "README.md", "LICENSE", "MANIFEST.in"):
            if (tree / name).is_file():
                shutil.copy2(tree / name, repo / name)
        shutil.copytree(tree / "src", repo / "src", dirs_exist_ok=True)
        env = {
            **os.environ,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        env |= {"GIT_AUTHOR_NAME": "compat", "GIT_AUTHOR_EMAIL": "compat@local"}
        env |= {"GIT_COMMITTER_NAME": "compat", "GIT_COMMITTER_EMAIL": "compat@local"}
        for cmd in (
            ["git", "init", "-q", "-b", "main"],
            ["git", "add", "-A"],
            ["git", "commit", "-q", "-m", "OpenEnv tree for dm_control_env"],
        ):
            subprocess.run(cmd, cwd=repo, env=env, check=True)
    redirect = {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"url.file://{repo}.insteadOf",
        "GIT_CONFIG_VALUE_0": OPENENV_GIT,
        "UV_EXCLUDE_NEWER": DM_CONTROL_EXCLUDE_NEWER,
    }
    return Prepared(env_vars=dict(redirect), environ=dict(redirect))


@contextlib.contextmanager
def _git(env_dir: Path, docker: bool) -> Iterator[Prepared]:
    work = cache_dir() / "git"
    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    port = _free_port()
    standin = [sys.executable, str(HERE / "gitea_standin.py")]
    standin += ["--root", str(work / "repos"), "--port", str(port)]
    with _background(standin, f"http://127.0.0.1:{port}/", work / "standin.log"):
        yield Prepared(
            env_vars={
                "GITEA_URL": f"http://127.0.0.1:{port}",
                "GITEA_USERNAME": "openenv",
                "GITEA_PASSWORD": "openenv",
                "WORKSPACE_DIR": str(work / "workspace"),
                # git_env writes ~/.gitconfig and ~/.git-credentials: not ours. uv
                # (which runs the server) keeps its cache and Pythons where they are.
                "HOME": str(work / "home"),
                **_uv_dirs(),
            }
        )


@contextlib.contextmanager
def _background(cmd: list[str], url: str, log_path: Path) -> Iterator[None]:
    """`cmd` running in its own process group until the block ends, once `url`
    answers."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, start_new_session=True)
    try:
        _wait_http(url, proc)
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


PLAYWRIGHT_CHROMIUM = "chromium-1117"
"""The browser build Playwright 1.44 (browsergym_env's pin) looks for."""
DEBIAN_CHROMIUM = Path("/usr/lib/chromium/chromium")


@contextlib.contextmanager
def _browsergym(env_dir: Path, docker: bool) -> Iterator[Prepared]:
    """Debian's chromium where Playwright looks for its own build, and MiniWoB's
    pages (PyPI `miniwob`'s `miniwob/html/`) served on 127.0.0.1."""
    notes = _ensure_chromium()
    browsers = cache_dir() / "playwright-browsers"
    chrome = browsers / PLAYWRIGHT_CHROMIUM / "chrome-linux" / "chrome"
    if not chrome.exists():
        chrome.parent.mkdir(parents=True, exist_ok=True)
        chrome.symlink_to(DEBIAN_CHROMIUM)
    pages = _pip_target("miniwob", "--no-deps", "miniwob==1.1.0") / "miniwob" / "html"
    port = _free_port()
    server = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1"]
    server += ["--directory", str(pages), str(port)]
    url = f"http://127.0.0.1:{port}/miniwob/"
    with _background(server, url, cache_dir() / "miniwob-server.log"):
        yield Prepared(
            env_vars={
                "BROWSERGYM_TASK_NAME": "click-test",
                "MINIWOB_URL": url,
                "PLAYWRIGHT_BROWSERS_PATH": str(browsers),
            },
            notes=notes,
        )


def _ensure_chromium() -> list[str]:
    """Debian's `chromium`, installed with apt-get when it is missing and this process
    is root (notes saying so); otherwise an error naming the command to run."""
    if DEBIAN_CHROMIUM.exists():
        return []
    command = "apt-get install -y chromium"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(
            f"browsergym_env needs Debian's chromium ({DEBIAN_CHROMIUM} is missing): "
            f"run `sudo apt-get update && sudo {command}`, then run this again"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # A fresh machine has no package lists yet: update first, as apt-get needs.
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "chromium"],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(cmd)}` exited {done.returncode} (browsergym_env needs "
                f"Debian's chromium): {(done.stderr or done.stdout).strip()[-600:]}"
            )
    if not DEBIAN_CHROMIUM.exists():
        raise RuntimeError(f"`{command}` ran, but {DEBIAN_CHROMIUM} is still missing")
    return [f"Debian chromium installed by the recipe (`{command}`)"]


def _uv_dirs() -> dict[str, str]:
    """uv's cache and Python folders as they are now (they follow HOME otherwise)."""
    found = {}
    for var, args in (
        ("UV_CACHE_DIR", ["cache", "dir"]),
        ("UV_PYTHON_INSTALL_DIR", ["python", "dir"]),
    ):
        out = subprocess.run(["uv", *args], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.strip():
            found[var] = os.environ.get(var) or out.stdout.strip()
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{url}: the stand-in exited with {proc.returncode}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=1):
                return
        time.sleep(0.2)
    raise TimeoutError(f"{url} not up within {timeout:.0f}s")


_PREPARE = {
    "agent_world_model_env": _agent_world_model,
    "openspiel_env": _openspiel,
    "tbench2_env": _tbench2,
    "git_env": _git,
    "dm_control_env": _dm_control,
    "browsergym_env": _browsergym,
}


@contextlib.contextmanager
def prepared(env: str, env_dir: Path, docker: bool = False) -> Iterator[Prepared]:
    """What `env` needs for its runs (in a container built from its Dockerfile when
    `docker`); stand-in servers it starts stop on exit."""
    prepare = _PREPARE.get(env)
    if prepare is None:
        yield Prepared()
        return
    result = prepare(env_dir, docker)
    if isinstance(result, contextlib.AbstractContextManager):
        with result as ready:
            yield ready
    else:
        yield result
