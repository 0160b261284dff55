"""Env projects laid out like real OpenEnv envs (`tests/envs/layouts/`), launched with
UV from another working directory, with nothing but their folder.

Each fixture is its own uv project (see its docstrings):

- `space_env`: a Hugging Face Space layout (setuptools, `package-dir` mapping the
  folder to `space_env`), imports that work as `server.app` and `space_env.server.app`;
- `relative_env`: the same with relative imports in `server/`, so only
  `relative_env.server.app:app` imports, though its openenv.yaml names `server.app:app`;
- `gradio_env` / `undeclared_gradio_env`: import gradio at module level, declaring it
  or not;
- `future_python_env`: `requires-python = ">=3.14"`, which no installed Python meets
  (it has no uv.lock: uv cannot lock without such a Python);
- `mcp_meta_env`: an MCP env whose reset observation carries its task only in
  `metadata`.

The guess-the-number envs hide `seed * 7 % 20 + 1` (seed 1: 8, seed 2: 15) and pay 1.0
for the right guess, which ends the episode. `mcp_meta_env` asks `What is 17 + 25?`
for seed 1; `answer(42)` pays 1.0 and ends it.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openenv_v1.core.launch.uv_prepared import prepared_env_dir
from tests.servers import (
    ROOT,
    model_flags,
    policy_server,
    processes_matching,
    recorded_requests,
    run_cli,
    run_eval,
)

# In one pytest-xdist worker, in file order: the last test checks what all the others
# launched is gone.
pytestmark = pytest.mark.xdist_group("layouts")

LAYOUTS = ROOT / "tests" / "envs" / "layouts"
PROJECT_NAMES = {
    "space_env": "layout-space-env",
    "relative_env": "layout-relative-env",
    "gradio_env": "layout-gradio-env",
    "undeclared_gradio_env": "layout-undeclared-gradio-env",
    "future_python_env": "layout-future-python-env",
    "mcp_meta_env": "layout-mcp-meta-env",
}
# Solves seed 1 (8) at once and seed 2 (15) after "Higher than 8."
GUESS_SCRIPT = ['{"guess": 8}', '{"guess": 15}']
APPLE_SCRIPT = [
    '{"type":"call_tool","tool_name":"rules","arguments":{}}',
    '{"type":"call_tool","tool_name":"add","arguments":{"a":-17,"b":25}}',
    '{"type":"call_tool","tool_name":"add","arguments":{"a":17,"b":25}}',
    '{"type":"call_tool","tool_name":"answer","arguments":{"value":42}}',
]
ENVELOPE_KEYS = ("structured_content", "structuredContent", "is_error", '"meta"')


def check(*args: str, cwd: Path, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """`openenv-v1 check ...` as a user types it, in `cwd`."""
    return run_cli("check", *args, cwd=cwd, timeout=timeout)


def check_json(
    project: str | Path, *args: str, cwd: Path, timeout: float = 180.0
) -> tuple[subprocess.CompletedProcess, dict]:
    """`check --project-path <project> --json ...` (no ENV_ID, no --app) and its
    report; a layout name stands for its folder under tests/envs/layouts."""
    path = project if isinstance(project, Path) or "/" in project else LAYOUTS / project
    proc = check("--project-path", str(path), "--json", *args, cwd=cwd, timeout=timeout)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"check printed no JSON report:\n{proc.stdout}\n{proc.stderr}")
    return proc, report


def layout_processes(*extra_env_dirs: Path) -> list[tuple[int, str]]:
    """Live processes of servers launched from the layout fixtures: `uv run --project
    <layout>`, and anything run from a layout's prepared environment (or from
    `extra_env_dirs`) or with a layout folder as its working directory."""
    env_dirs = [
        prepared_env_dir(str(LAYOUTS / folder), name)
        for folder, name in PROJECT_NAMES.items()
    ] + list(extra_env_dirs)
    found = set(processes_matching(f"--project {LAYOUTS}/"))
    for env_dir in env_dirs:
        found.update(processes_matching(f"{env_dir}/"))
    for pid, cmdline in processes_matching(""):
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            continue
        if cwd == LAYOUTS or LAYOUTS in cwd.parents:
            found.add((pid, cmdline))
    return sorted(found)


def none_left(*extra_env_dirs: Path, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while layout_processes(*extra_env_dirs) and time.monotonic() < deadline:
        time.sleep(0.2)
    return layout_processes(*extra_env_dirs) == []


def copy_layout(env: str, tmp_path: Path, scripts: str | None) -> Path:
    """A copy of a layout fixture in `tmp_path`, its `[project.scripts]` entry replaced
    by `scripts` (None: removed)."""
    project = tmp_path / env
    shutil.copytree(
        LAYOUTS / env,
        project,
        ignore=shutil.ignore_patterns(".venv", "__pycache__", "*.egg-info"),
    )
    pyproject = project / "pyproject.toml"
    text = pyproject.read_text()
    entry = f'[project.scripts]\nserver = "{env}.server.app:main"\n'
    assert entry in text
    replacement = "" if scripts is None else f"[project.scripts]\n{scripts}\n"
    pyproject.write_text(text.replace(entry, replacement))
    return project


def messages_of(request: dict) -> list[tuple[str, str]]:
    """(role, text) of each message of a chat request."""
    out = []
    for message in request["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content if "text" in p)
        out.append((message["role"], content or ""))
    return out


def eval_layout(
    env: str, script: list[str], resets: str, tmp_path: Path, record: Path
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """A real `eval` of a layout fixture, launched with UV from `tmp_path` with only
    its `project_path`, against the scripted local policy."""
    kwargs = json.dumps({"project_path": str(LAYOUTS / env)})
    with policy_server("script", script=script, record=record) as policy:
        return run_eval(
            [
                "openenv-v1",
                "--taskset.env",
                f"local/{env}",
                "--taskset.task.user.provider-kwargs",
                kwargs,
                "--taskset.resets",
                resets,
                "-c",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
        )


def assert_all_done(proc: subprocess.CompletedProcess, traces: list[dict], count: int):
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == count, proc.stderr[-3000:]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"


@pytest.mark.parametrize("env", ["space_env", "relative_env"])
def test_check_launches_a_space_layout_from_elsewhere_with_its_project_scripts_app(
    env, tmp_path
):
    project = LAYOUTS / env
    lock = (project / "uv.lock").read_bytes()
    proc, report = check_json(
        env, "--reset", '{"seed": 1}', "--action", '{"guess": 8}', cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"] and report["failure"] is None
    app = report["app"]
    assert app["app"] == f"{env}.server.app:app"
    assert "[project.scripts]" in app["source"]
    assert app["failed"] == []
    assert report["reset"]["observation"]["message"].startswith("Guess a whole number")
    assert (report["step"]["reward"], report["step"]["done"]) == (1.0, True)
    # The launch leaves the project as it was: no .venv in it, its lock untouched.
    assert not (project / ".venv").exists()
    assert (project / "uv.lock").read_bytes() == lock
    assert none_left()


def test_check_passes_over_an_app_that_cannot_import_and_reports_why(tmp_path):
    """A stale `[project.scripts]` entry names a module that does not exist: the next
    candidate, openenv.yaml's `server.app:app`, is served (the Space layout's imports
    work from its folder), and the stale one is listed as failed with its reason."""
    project = copy_layout(
        "space_env", tmp_path, 'server = "space_env.server.main:main"'
    )
    work = tmp_path / "work"
    work.mkdir()
    env_dir = prepared_env_dir(str(project), PROJECT_NAMES["space_env"])
    try:
        proc, report = check_json(project, cwd=work)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert report["ok"]
        app = report["app"]
        assert app["app"] == "server.app:app"
        assert "openenv.yaml" in app["source"]
        (failed,) = app["failed"]
        assert failed["app"] == "space_env.server.main:app"
        assert "[project.scripts]" in failed["source"]
        assert "space_env.server.main" in failed["error"]
        assert none_left(env_dir)
    finally:
        shutil.rmtree(env_dir, ignore_errors=True)


def test_check_lists_each_app_candidate_and_why_when_none_imports(tmp_path):
    """Without `[project.scripts]`, relative_env's only candidate is openenv.yaml's
    `server.app:app`, which its relative imports break: the launch fails naming it,
    the reason, and `--app`."""
    project = copy_layout("relative_env", tmp_path, None)
    work = tmp_path / "work"
    work.mkdir()
    env_dir = prepared_env_dir(str(project), PROJECT_NAMES["relative_env"])
    try:
        proc, report = check_json(project, cwd=work)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        failure = report["failure"]
        assert not report["ok"] and failure["stage"] == "launch"
        assert "server.app:app" in failure["error"]
        assert "openenv.yaml" in failure["error"]
        assert "attempted relative import beyond top-level package" in failure["error"]
        assert "; set `--app` to the module that calls `create_app`" in failure["error"]
        assert none_left(env_dir)
    finally:
        shutil.rmtree(env_dir, ignore_errors=True)


@pytest.mark.parametrize("env", ["space_env", "relative_env"])
def test_eval_plays_a_space_layout_launched_with_only_its_project_path(env, tmp_path):
    record = tmp_path / "requests.jsonl"
    proc, traces = eval_layout(
        env, GUESS_SCRIPT, '[{"seed": 1}, {"seed": 2}]', tmp_path, record
    )
    assert_all_done(proc, traces, 2)
    by_seed = {t["task"]["data"]["reset"]["seed"]: t for t in traces}
    assert by_seed[1]["rewards"]["openenv_reward"] == 1.0
    assert by_seed[1]["metrics"]["openenv_steps"] == 1
    assert by_seed[2]["rewards"]["openenv_reward"] == 1.0
    assert by_seed[2]["metrics"]["openenv_steps"] == 2
    requests = recorded_requests(record)
    assert len(requests) == 3
    for request in requests:
        role, text = messages_of(request)[0]
        assert role == "user" and text.startswith("Guess a whole number from 1 to 20")
    assert any(
        text.startswith("Higher than 8.")
        for request in requests
        for _, text in messages_of(request)
    )
    assert none_left()


def test_check_launches_an_env_that_declares_the_gradio_it_imports(tmp_path):
    proc, report = check_json("gradio_env", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"]
    assert report["app"]["app"] == "gradio_env.server.app:app"
    assert none_left()


def test_an_env_importing_gradio_it_does_not_declare_is_relaunched_with_it(tmp_path):
    proc, report = check_json("undeclared_gradio_env", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"] and report["app"]["gradio_hidden"] is False
    (note,) = [w for w in report["warnings"] if "gradio" in w]
    assert "turn on `--web-ui` to skip the first try" in note
    assert none_left()

    proc, report = check_json("undeclared_gradio_env", "--web-ui", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"]
    assert report["app"]["app"] == "undeclared_gradio_env.server.app:app"
    assert none_left()


def test_check_shows_the_servers_own_output_when_building_the_env_fails(tmp_path):
    env_vars = json.dumps({"env_vars": {"GUESS_BUILD_FAILS": "no scenario data here"}})
    proc, report = check_json(
        "space_env",
        "--provider-kwargs",
        env_vars,
        "--probe-sessions",
        "0",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = report["failure"]
    assert "FACTORY_ERROR" in failure["error"]
    # The server's message hides the env's exception; its output has it.
    assert "RuntimeError: no scenario data here" in failure["error"]
    assert "could not build the env" in failure["hint"]
    assert none_left()


def test_check_names_the_python_an_env_needs_when_uv_cannot_provide_it(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("UV_PYTHON", raising=False)
    started = time.monotonic()
    proc, report = check_json("future_python_env", cwd=tmp_path, timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert elapsed < 60
    failure = report["failure"]
    assert not report["ok"] and failure["stage"] == "launch"
    assert ">=3.14" in failure["error"]
    assert "uv python install" in failure["error"]
    assert "--base-url" not in failure["error"] + failure["hint"]
    assert not (LAYOUTS / "future_python_env" / ".venv").exists()
    assert none_left()


def test_check_names_a_uv_python_pin_the_env_does_not_support(tmp_path, monkeypatch):
    """UV_PYTHON reaches env servers (every `UV_*` setting does); pinned to a Python
    the env's requires-python excludes, the failure says so, not "install one"."""
    pinned = Path(sys._base_executable)
    monkeypatch.setenv("UV_PYTHON", str(pinned))
    proc, report = check_json("future_python_env", cwd=tmp_path, timeout=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    error = report["failure"]["error"]
    version = ".".join(map(str, sys.version_info[:3]))
    assert f"the env needs Python >=3.14, and uv was told to use Python {version}" in (
        error
    )
    assert "UV_PYTHON" in error and "uv python install" not in error
    assert not (LAYOUTS / "future_python_env" / ".venv").exists()
    assert none_left()


def test_check_launches_a_git_url_with_the_app_its_clone_names(tmp_path):
    repo = copy_layout("space_env", tmp_path, 'server = "space_env.server.app:main"')
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "space_env"], cwd=repo, check=True)
    url = f"git+file://{repo}"
    work = tmp_path / "work"
    work.mkdir()
    env_dir = prepared_env_dir(url, PROJECT_NAMES["space_env"])
    try:
        proc, report = check_json(
            url, "--reset", '{"seed": 2}', "--action", '{"guess": 15}', cwd=work
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert report["ok"]
        assert report["app"]["app"] == "space_env.server.app:app"
        assert "[project.scripts]" in report["app"]["source"]
        assert report["step"]["reward"] == 1.0
        assert none_left(env_dir)
    finally:
        shutil.rmtree(env_dir, ignore_errors=True)


def test_check_shows_a_task_that_is_only_in_the_reset_metadata(tmp_path):
    proc, report = check_json("mcp_meta_env", "--reset", '{"seed": 1}', cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["ok"]
    assert report["app"]["app"] == "mcp_meta_env.server.app:app"
    reset = report["reset"]
    # The observation has nothing of its own: the task is in its metadata...
    assert set(reset["observation"]) <= {"metadata", "done", "reward"}
    assert reset["observation"]["metadata"]["question"] == "What is 17 + 25?"
    # ...and the model's first turn shows it.
    assert "What is 17 + 25?" in reset["turn"]
    assert "Use the add tool, then answer." in reset["turn"]
    assert none_left()


def test_eval_of_an_mcp_env_shows_metadata_task_and_compact_tool_results(tmp_path):
    record = tmp_path / "requests.jsonl"
    proc, traces = eval_layout(
        "mcp_meta_env", APPLE_SCRIPT, '[{"seed": 1}]', tmp_path, record
    )
    assert_all_done(proc, traces, 1)
    (trace,) = traces
    assert trace["rewards"]["openenv_reward"] == 1.0
    assert trace["metrics"]["openenv_steps"] == 4
    requests = recorded_requests(record)
    assert len(requests) == 4
    conversation = messages_of(requests[-1])
    users = [text for role, text in conversation if role == "user"]
    assert len(users) == 4
    opening, rules, refused, added = users
    assert "What is 17 + 25?" in opening and "call_tool" in opening
    assert rules.startswith("rules: Work out the sum")
    assert refused.startswith("error: ")
    assert "cannot add a negative number of apples" in refused
    assert added == 'add: {"value":42,"unit":"apples"}'
    for text in users[1:]:
        assert not any(key in text for key in ENVELOPE_KEYS), text
    assert none_left()


def test_nothing_launched_from_the_layouts_is_left_running():
    """Runs after the tests above (file order): every server they launched, from a
    layout folder, its prepared environment or a `uv run --project` on it, is gone."""
    assert none_left(), layout_processes()
