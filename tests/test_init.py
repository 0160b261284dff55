"""`openenv-v1 init NAME`: a wrapper package for one env, written from what `check`
found in it, whose own tests pass with this environment's pytest and whose taskset
runs by its name (verifiers 0.2 here; tests/vf04/test_vf_init.py runs the same on
0.4). How an action is built from a check report, and what a bad NAME or a failed
check gives, in process."""

import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from openenv_v1.cli.init import (
    Findings,
    example_reply,
    module_name,
    run_init,
    write_package,
)
from tests.servers import WORDLE_APP, WORDLE_PROJECT, free_port, run_cli


def init_and_run_its_tests(tmp_path: Path) -> None:
    """`init` on the local Wordle env folder, then the package's own tests, the
    package importable as `uv pip install -e` makes it (on `PYTHONPATH` here, so the
    suite's environment is left as it was)."""
    proc = run_cli(
        "init",
        "my-wordle-v1",
        *("--project-path", str(WORDLE_PROJECT)),
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    root = tmp_path / "my-wordle-v1"
    assert f"wrote {root}: my_wordle_v1/__init__.py (app {WORDLE_APP}" in proc.stdout
    source = (root / "my_wordle_v1" / "__init__.py").read_text()
    # What check found: the app it chose, the env's own tasks, an action it took.
    assert f"'app': '{WORDLE_APP}'" in source
    assert f"'project_path': '{WORDLE_PROJECT}'" in source
    assert "RESETS: list[dict[str, Any]] | None = None\n" in source
    assert "class MyWordleV1Taskset(OpenEnvTaskset" in source
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    assert "2 passed" in tests.stdout


@pytest.mark.long
def test_init_writes_a_package_whose_own_tests_pass(tmp_path):
    init_and_run_its_tests(tmp_path)


def test_the_package_is_written_from_the_findings_and_compiles(tmp_path):
    findings = Findings(
        env="local/thing",
        base_url=None,
        launch={"project_path": "/envs/thing", "app": "thing.server.app:app"},
        resets=[{}],
        reply='{"move": 1}',
        notes=("app thing.server.app:app", "one empty reset", "a text action"),
    )
    root = tmp_path / "thing-v1"
    write_package(root, "thing-v1", findings)
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [
        "README.md",
        "pyproject.toml",
        "tests/test_thing_v1.py",
        "thing_v1/__init__.py",
    ]
    module = (root / "thing_v1" / "__init__.py").read_text()
    compile(module, "thing_v1/__init__.py", "exec")
    compile((root / "tests/test_thing_v1.py").read_text(), "test", "exec")
    assert "ENV: str | None = 'local/thing'\n" in module
    assert "LAUNCH: dict[str, Any] = {'project_path': '/envs/thing'," in module
    assert "REPLY: str = '{\"move\": 1}'\n" in module
    assert "class ThingV1Config(OpenEnvConfig):" in module
    pyproject = (root / "pyproject.toml").read_text()
    assert 'name = "thing-v1"' in pyproject and 'packages = ["thing_v1"]' in pyproject
    assert "one empty reset" in (root / "README.md").read_text()


def test_an_action_is_built_from_the_schema_or_the_first_tool():
    raw = {
        "action": {
            "raw_field": "message",
            "schema": {
                "type": "object",
                "properties": {"message": {"type": "string"}, "metadata": {}},
                "required": ["message"],
            },
        }
    }
    assert example_reply(raw) == "..."
    fields = {
        "action": {
            "raw_field": None,
            "schema": {
                "type": "object",
                "properties": {"row": {"type": "integer", "minimum": 2}},
                "required": ["row"],
            },
        }
    }
    assert json.loads(example_reply(fields)) == {"row": 2}
    mcp = {
        "action": {"schema": {"type": "object"}},
        "tools": [
            {
                "name": "echo",
                "input_schema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            },
            {"name": "other", "input_schema": {}},
        ],
    }
    assert json.loads(example_reply(mcp)) == {
        "type": "call_tool",
        "tool_name": "echo",
        "arguments": {"text": "..."},
    }
    # A schema no example can be built for (a pattern): an empty object.
    pattern = {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "a"}},
    }
    assert example_reply({"action": {"schema": {**pattern, "required": ["x"]}}}) == "{}"


def test_a_bad_name_or_an_existing_folder_writes_nothing(tmp_path, capsys):
    args = Namespace(name="My_Env", dir=str(tmp_path), base_url="http://x", env=None)
    assert run_init(args) == 1
    assert "NAME 'My_Env' must be lowercase letters" in capsys.readouterr().err
    (tmp_path / "taken-v1").mkdir()
    args.name = "taken-v1"
    assert run_init(args) == 1
    assert f"{tmp_path / 'taken-v1'} exists: remove it" in capsys.readouterr().err
    assert module_name("my-env-v1") == "my_env_v1"


def test_an_env_that_fails_check_writes_nothing_and_names_the_stage(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    args = Namespace(
        name="dead-v1", dir=str(tmp_path), base_url=url, env=None, app=None
    )
    assert run_init(args) == 1
    error = capsys.readouterr().err
    assert f"the env failed `openenv-v1 check --base-url {url}` at its " in error
    assert "ECONNREFUSED" in error
    assert list(tmp_path.iterdir()) == []
