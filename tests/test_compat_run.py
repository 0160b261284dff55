"""compatibility/run.py's own parts: the eval command of the installed verifiers line,
the traces it reads back, the table, and the recipes' Docker mounts. Fast: no env is
launched (the runs themselves are in docs/real-envs.md)."""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compatibility import recipes
from compatibility.causes import classify
from compatibility.commands import LINE, eval_command, read_traces
from compatibility.env_table import ENVS
from compatibility.report import Result, reward_of, table

ROOT = Path(__file__).resolve().parent.parent


def _args(**more) -> argparse.Namespace:
    base = dict(
        provider_kwargs={},
        launch_timeout=600.0,
        step_timeout=30.0,
        docker=False,
        provider=None,
    )
    return argparse.Namespace(**{**base, **more})


def test_eval_command_is_the_installed_lines_own(tmp_path):
    spec = ENVS["maze_env"]
    cmd = eval_command(
        "maze_env", tmp_path, spec, "http://127.0.0.1:1/v1", tmp_path, _args(), False
    )
    prefix = "--env.taskset." if LINE == "vf04" else "--taskset."
    assert Path(cmd[0]).name == ("vf-eval" if LINE == "vf04" else "eval")
    assert Path(cmd[0]).exists(), cmd[0]
    settings = [arg for arg in cmd if arg.startswith("--") and "taskset" in arg]
    assert settings and all(arg.startswith(prefix) for arg in settings), settings
    assert json.loads(cmd[cmd.index(f"{prefix}resets") + 1]) == [spec.reset]
    turns = "--env.player.max-turns" if LINE == "vf04" else "--max-turns"
    assert cmd[cmd.index(turns) + 1] == str(spec.max_turns)


def test_eval_command_in_docker_names_this_lines_flag(tmp_path):
    spec = ENVS["maze_env"]
    cmd = eval_command(
        "maze_env", tmp_path, spec, "u", tmp_path, _args(docker=True), False
    )
    if LINE == "vf04":
        assert cmd[cmd.index("--env.taskset.use-docker") + 1] == "true"
    else:
        assert cmd[cmd.index("--taskset.docker-on-host") + 1] == "true"


def test_read_traces_gives_each_rollouts_trace_with_its_episodes_errors(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    failed = {"type": "OpenEnvError", "message": "launch failed"}
    if LINE == "vf04":
        lines = [
            {
                "traces": [{"stop_condition": "openenv_done", "errors": []}],
                "errors": [],
            },
            {"traces": [], "errors": [failed]},
        ]
    else:
        lines = [{"stop_condition": "openenv_done", "errors": []}, {"errors": [failed]}]
    (run / "traces.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    traces = read_traces(tmp_path)
    assert [t.get("stop_condition") for t in traces] == ["openenv_done", None]
    assert traces[1]["errors"] == [failed]


def test_reward_of_reads_both_lines_shapes():
    assert reward_of({"rewards": {"openenv_reward": 0.5}}) == 0.5
    assert reward_of({"rewards": {"openenv_reward": {"score": 1.0}}}) == 1.0
    assert reward_of({}) is None


def test_table_escapes_pipes_and_joins_notes():
    row = Result("x_env", "ok", "FAIL", notes=["a | b", "c"])
    assert table([row]).splitlines()[-1] == "| x_env | ok | FAIL | a \\| b; c |"


def test_docker_recipes_mount_the_data_at_the_images_own_paths(tmp_path):
    with recipes.prepared("agent_world_model_env", tmp_path, docker=True) as ready:
        assert ready.env_vars == {"AWM_DATA_DIR": "/data/awm"}
        run_args = ready.provider_kwargs["docker_run_args"]
        assert run_args == ["-v", f"{recipes.DATA / 'agent_world_model'}:/data/awm:ro"]
    with recipes.prepared("agent_world_model_env", tmp_path) as ready:
        assert ready.env_vars["AWM_DATA_DIR"] == str(recipes.DATA / "agent_world_model")
        assert ready.provider_kwargs == {}


def test_tbench2_in_docker_mounts_a_writable_task_copy_and_its_tools(tmp_path):
    with recipes.prepared("tbench2_env", tmp_path, docker=True) as ready:
        assert ready.env_vars["TB2_TASKS_DIR"] == "/compat/tbench2-tasks"
        assert ready.env_vars["PYTHONPATH"] == "/app/env:/compat/tools"
        run_args = ready.provider_kwargs["docker_run_args"]
        assert run_args[0::2] == ["-v", "-v"]
        tasks = Path(run_args[1].split(":")[0])
        assert run_args[1] == f"{tasks}:/compat/tbench2-tasks"
        assert run_args[3].endswith(":/compat/tools:ro")
        # The container runs as uid 65534: every file of the copy is writable by all.
        assert all(p.stat().st_mode & 0o002 for p in [tasks, *tasks.rglob("*")])


def run_compat(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`compatibility/run.py ARGS` in `cwd` (also its HOME), on a bare PATH."""
    return subprocess.run(
        [sys.executable, str(ROOT / "compatibility" / "run.py"), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)},
    )


def test_docker_skips_say_why_and_are_not_run(tmp_path):
    """`--docker` skips an env whose Dockerfile cannot build here, with the cause,
    and starts nothing for it."""
    out = run_compat(
        tmp_path, "--envs-dir", str(tmp_path), "--only", "openspiel_env", "--docker"
    )
    assert out.returncode != 0 and "not env folders" in out.stderr
    (tmp_path / "openspiel_env").mkdir()
    (tmp_path / "openspiel_env" / "pyproject.toml").write_text("[project]\n")
    out = run_compat(
        tmp_path, "--envs-dir", str(tmp_path), "--only", "openspiel_env", "--docker"
    )
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[-1]
    assert row.startswith("| openspiel_env | skipped | skipped | in Docker: ")
    assert "openenv-openspiel-base" in row


def _openenv_tree(root: Path, dependency: str) -> Path:
    """A minimal OpenEnv checkout: its package files and one env naming `dependency`."""
    (root / "src" / "openenv").mkdir(parents=True)
    (root / "src" / "openenv" / "__init__.py").write_text("")
    (root / "pyproject.toml").write_text('[project]\nname = "openenv"\n')
    env = root / "envs" / "dm_control_env"
    env.mkdir(parents=True)
    (env / "pyproject.toml").write_text(
        f'[project]\nname = "x"\ndependencies = [\n    "{dependency}",\n]\n'
    )
    return env


def test_dm_control_takes_the_git_url_its_own_pyproject_names(tmp_path, monkeypatch):
    """The redirect is for the URL the env's checkout names: huggingface/OpenEnv
    today, meta-pytorch/OpenEnv at 685de41; each tree gets a git repo of its own."""
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENENV_GIT_REPO", raising=False)
    repos = []
    for owner, name in (
        ("huggingface", "openenv[core]"),
        ("meta-pytorch", "openenv-core[core]"),
    ):
        url = f"https://github.com/{owner}/OpenEnv.git"
        env = _openenv_tree(tmp_path / owner, f"{name} @ git+{url}")
        (tmp_path / owner / "src" / "openenv" / f"{owner}.py").write_text("")
        with recipes.prepared("dm_control_env", env) as ready:
            assert ready.environ["GIT_CONFIG_VALUE_0"] == url
            assert ready.environ["UV_EXCLUDE_NEWER"]  # no lock: mujoco held back
            key = ready.environ["GIT_CONFIG_KEY_0"]
            repo = Path(key.removeprefix("url.file://").removesuffix(".insteadOf"))
            assert (repo / "src" / "openenv" / f"{owner}.py").is_file()
            repos.append(repo)
    assert repos[0] != repos[1]


def test_dm_control_without_a_git_dependency_says_which_file(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENENV_GIT_REPO", raising=False)
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path / "cache"))
    env = _openenv_tree(tmp_path, "openenv[core]>=0.2.2")
    with pytest.raises(
        recipes.RecipeFailed, match=r"pyproject\.toml names no git\+https"
    ):
        with recipes.prepared("dm_control_env", env):
            pass


def test_classify_names_whose_a_failure_is():
    e2b = (
        "the env ended the episode at its reset (`done: true` before any step); ... "
        "forward it by name with `--forward-env` (E2B_API_KEY)"
    )
    assert classify(e2b) == "env's own need (an E2B sandbox: E2B_API_KEY)"
    assert classify("SERPER_API_KEY is not set") == "env's own need (an API key)"
    bug = classify("AttributeError: 'str' object has no attribute 'flag'")
    assert bug.startswith("adapter bug (")
    http_only = "it speaks only HTTP (POST /reset, POST /step, GET /state, POST /mcp"
    assert classify(http_only) == "env's own (no OpenEnv /ws endpoint)"
    echo = (
        "the list_tools step did not answer within 30s (a known cause: servers on "
        "openenv-core 0.2.2 deadlock on MCP steps over /ws"
    )
    assert classify(echo) == "env's own (its lock pins openenv-core 0.2.2)"
    assert classify("KeyError: 'observation'") == "adapter?"


def _git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PATH": "/usr/bin:/bin",
    }
    env |= {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
    }
    env |= {"GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True
    )
    return out.stdout.decode().strip()


def test_dm_control_takes_a_locked_commit_from_a_clone_that_has_it(
    tmp_path, monkeypatch
):
    """385de5eb's dm_control_env locks openenv at one commit: uv fetches exactly it,
    so the repo must be a clone that has it (the tree itself, or OPENENV_GIT_REPO);
    a snapshot without it is refused naming the commit and the variable."""
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENENV_GIT_REPO", raising=False)
    url = "https://github.com/huggingface/OpenEnv.git"
    clone = tmp_path / "clone"
    env = _openenv_tree(clone, f"openenv[core] @ git+{url}")
    _git("init", "-q", "-b", "main", cwd=clone)
    _git("add", "-A", cwd=clone)
    _git("commit", "-q", "-m", "tree", cwd=clone)
    commit = _git("rev-parse", "HEAD", cwd=clone)
    (env / "uv.lock").write_text(f'source = {{ git = "{url}#{commit}" }}\n')
    with recipes.prepared("dm_control_env", env) as ready:
        assert ready.environ["GIT_CONFIG_KEY_0"] == f"url.file://{clone}.insteadOf"
        assert "UV_EXCLUDE_NEWER" not in ready.environ  # the lock keeps its pins
    snapshot = tmp_path / "snapshot"
    shutil.copytree(clone, snapshot, ignore=shutil.ignore_patterns(".git"))
    env = snapshot / "envs" / "dm_control_env"
    with pytest.raises(
        recipes.RecipeFailed, match=f"pins openenv at commit {commit}.*OPENENV_GIT_REPO"
    ):
        with recipes.prepared("dm_control_env", env):
            pass
    monkeypatch.setenv("OPENENV_GIT_REPO", str(clone))
    with recipes.prepared("dm_control_env", env) as ready:
        assert ready.environ["GIT_CONFIG_KEY_0"] == f"url.file://{clone}.insteadOf"


def test_a_recipe_that_cannot_be_made_is_the_envs_row_not_a_crash(tmp_path):
    """run.py goes on past an env whose needs cannot be made here: its row says
    why, whose it is, and nothing is launched for it."""
    url = "https://github.com/huggingface/OpenEnv.git"
    env = _openenv_tree(tmp_path / "tree", f"openenv[core] @ git+{url}")
    (env / "uv.lock").write_text(f'source = {{ git = "{url}#{"0" * 40}" }}\n')
    out = run_compat(
        tmp_path, "--envs-dir", str(env.parent), "--only", "dm_control_env"
    )
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[-1]
    assert row.startswith("| dm_control_env | FAIL (recipe) | not run | ")
    assert "env's own need (a git dependency): recipe: RuntimeError: " in row
    assert f"pins openenv at commit {'0' * 40}" in row and "OPENENV_GIT_REPO" in row
