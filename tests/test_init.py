"""`openenv-v1 init NAME`: a wrapper package for one env, written from what `check`
found in it, whose own tests pass with this environment's pytest and whose taskset
runs by its name (verifiers 0.2 here; tests/vf04/test_vf_init.py runs the same on
0.4). How an action is built from a check report, and what a bad NAME or a failed
check gives, in process."""

import copy
import json
import os
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from wordle_env.game import WordleGame

from openenv_v1.cli.init import (
    MAX_REPLIES,
    SEEDED_TASKS,
    Findings,
    InitError,
    accepted_reply,
    default_resets,
    example_replies,
    example_reply,
    module_name,
    resets_source,
    run_init,
    write_package,
)
from openenv_v1.core.episode.env_source import read_reset_params
from tests.servers import (
    TEST_ENVS,
    WORDLE_APP,
    WORDLE_PROJECT,
    free_port,
    run_cli,
)

GUESS_PROJECT = TEST_ENVS / "layouts" / "space_env"
"""A guess-the-number env without the Task API whose `reset` takes a `seed`."""
SEEDED = f'RESETS: list[dict[str, Any]] | None = [{{"seed": i}} for i in range({SEEDED_TASKS})]\n'


def init_and_run_its_tests(tmp_path: Path) -> None:
    """`init` on the local Wordle env folder, then the package's own tests, the
    package importable as `uv pip install -e` makes it (on `PYTHONPATH` here, so the
    suite's environment is left as it was)."""
    root, printed, source = init_package(tmp_path, "my-wordle-v1", WORDLE_PROJECT)
    assert f"wrote {root}: my_wordle_v1/__init__.py (app {WORDLE_APP}" in printed
    assert "the env's own tasks (Task API)" in printed
    # What check found: the app it chose, the env's own tasks, an action it took.
    assert f"'app': '{WORDLE_APP}'" in source
    assert f"'project_path': '{WORDLE_PROJECT}'" in source
    assert "RESETS: list[dict[str, Any]] | None = None\n" in source
    assert "class MyWordleV1Taskset(OpenEnvTaskset" in source
    # The action is the guess the schema's description gives ("e.g. [crane]"), a
    # legal move by the game's own rules, not a placeholder.
    assert "REPLY: str = '[crane]'\n" in source
    assert WordleGame.new(seed=0).submit("[crane]").valid
    run_package_tests(root)


def init_package(tmp_path: Path, name: str, project: Path) -> tuple[Path, str, str]:
    """`openenv-v1 init NAME --project-path project` in `tmp_path`: the package's
    folder, what init printed, and the package module's source."""
    proc = run_cli(
        "init", name, *("--project-path", str(project)), cwd=tmp_path, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    root = tmp_path / name
    return root, proc.stdout, (root / module_name(name) / "__init__.py").read_text()


def run_package_tests(root: Path) -> None:
    """The package's own tests (check stepping its REPLY on its first task, one
    episode playing it) pass."""
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


def init_a_seeded_env_and_run_its_tests(tmp_path: Path) -> None:
    """`init` on an env without the Task API whose source shows `reset(seed=...)`:
    the package's tasks are seeds 0..15, written as the comprehension to edit; its
    action is the schema's built example (`{"guess": 1}`, in range), stepped on
    seed 0's game by init and again by the package's own tests, which pass."""
    root, printed, source = init_package(tmp_path, "guess-v1", GUESS_PROJECT)
    assert "16 seeded resets (its reset takes a seed)" in printed
    assert SEEDED in source
    assert "takes a `seed` (check found it)" in source
    assert "REPLY: str = '{\"guess\": 1}'\n" in source
    run_package_tests(root)


@pytest.mark.long
def test_an_env_whose_reset_takes_a_seed_starts_from_16_seeded_tasks(tmp_path):
    init_a_seeded_env_and_run_its_tests(tmp_path)


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


def test_seeded_resets_are_written_as_the_comprehension_to_edit(tmp_path):
    seeds = [{"seed": i} for i in range(SEEDED_TASKS)]
    assert SEEDED_TASKS == 16
    assert eval(resets_source(seeds)) == seeds
    assert resets_source([{}]) == "[{}]" and resets_source(None) == "None"
    # Other lists as they are: a gap in the seeds, a kwarg beside the seed.
    assert resets_source([{"seed": 0}, {"seed": 2}]) == repr([{"seed": 0}, {"seed": 2}])
    other = [{"seed": 0, "level": 1}, {"seed": 1}]
    assert resets_source(other) == repr(other)
    findings = Findings(
        env="local/thing",
        base_url=None,
        launch={},
        resets=seeds,
        reply="1",
        notes=("16 seeded resets (its reset takes a seed)",),
    )
    write_package(tmp_path / "thing-v1", "thing-v1", findings)
    module = (tmp_path / "thing-v1" / "thing_v1" / "__init__.py").read_text()
    compile(module, "thing_v1/__init__.py", "exec")
    assert SEEDED in module
    assert "so each task is the game of one seed.\nEdit here:" in module


ENV_SOURCE = """
from openenv.core.env_server.interfaces import Environment


class ThingEnvironment(Environment):
    def reset(self, {params}):
        ...
"""


def reset_params_of(tmp_path: Path, params: str):
    """The reset parameters read from an env source whose `reset` takes `params`."""
    folder = tmp_path / params.replace("*", "").replace(" ", "").replace(",", "_")
    (folder / "server").mkdir(parents=True)
    (folder / "server" / "env.py").write_text(ENV_SOURCE.format(params=params))
    params = read_reset_params(folder)
    assert params is not None
    return params


SEEDS = [{"seed": i} for i in range(16)]


def report_of(tasks: bool, seed_check: str) -> dict:
    return {"tasks": {"offered": tasks}, "seed_check": {"status": seed_check}}


def test_the_tasks_are_the_envs_own_else_seeds_when_its_reset_takes_one(tmp_path):
    seeded = reset_params_of(tmp_path, "seed=None, episode_id=None")
    no_seed = reset_params_of(tmp_path, "episode_id=None, level=1")
    any_key = reset_params_of(tmp_path, "**kwargs")
    # The Task API wins: the env's own tasks.
    assert default_resets(report_of(True, "honoured"), seeded) is None
    # A `seed` in the source: seeds, though the reset shows nothing that changes
    # with it (Wordle's secret: the seed check says "ignored").
    assert default_resets(report_of(False, "ignored"), seeded) == SEEDS
    # No `seed` and no **kwargs: the server drops the key, whatever the check saw.
    assert default_resets(report_of(False, "honoured"), no_seed) == [{}]
    assert default_resets(report_of(False, "ignored"), no_seed) == [{}]
    # `**kwargs`, or no source here (a Space, an image, a server): the seed check.
    assert default_resets(report_of(False, "honoured"), any_key) == SEEDS
    assert default_resets(report_of(False, "ignored"), any_key) == [{}]
    assert default_resets(report_of(False, "honoured"), None) == SEEDS
    for status in ("ignored", "not honoured", "error"):
        assert default_resets(report_of(False, status), None) == [{}]


def test_the_schemas_own_examples_are_tried_before_the_built_action():
    wordle = {
        "action": {
            "raw_field": "message",
            "schema": {
                "type": "object",
                "properties": {
                    "message": {
                        "type": "string",
                        "description": "Your guess in square brackets, e.g. [crane].",
                    },
                    "metadata": {"type": "object"},
                },
                "required": ["message"],
            },
        }
    }
    assert example_replies(wordle) == ["[crane]", "..."]
    assert example_reply(wordle) == "..."
    board = {
        "action": {
            "schema": {
                "type": "object",
                "properties": {
                    "row": {"type": "integer", "minimum": 1, "examples": [3]},
                    "col": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "The column, for example `7`; or e.g. x.",
                    },
                },
                "required": ["row", "col"],
                "examples": [{"row": 2, "col": 2}, {"row": 0, "col": 0}],
            }
        }
    }
    # The schema's examples, then a field's (`examples`, a description's: "x" is no
    # integer and {"row": 0} breaks the minimum, so both are left out), then the
    # built action.
    assert [json.loads(r) for r in example_replies(board)] == [
        {"row": 2, "col": 2},
        {"row": 3, "col": 1},
        {"row": 1, "col": 7},
        {"row": 1, "col": 1},
    ]
    # Many examples: the first three the schema gives (row 1 is the built action's),
    # then the built action.
    many = copy.deepcopy(board)
    many["action"]["schema"]["examples"] = []
    many["action"]["schema"]["properties"]["row"]["examples"] = list(range(1, 9))
    replies = example_replies(many)
    assert len(replies) == MAX_REPLIES == 4
    assert [json.loads(r) for r in replies[:-1]] == [
        {"row": n, "col": 1} for n in (2, 3, 4)
    ]
    assert json.loads(replies[-1]) == {"row": 1, "col": 1}
    tool = {
        "action": {"schema": {"type": "object"}},
        "tools": [
            {
                "name": "move",
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "uci": {"type": "string", "description": "e.g. 'e2e4'"}
                    },
                    "required": ["uci"],
                },
            }
        ],
    }
    assert [json.loads(r)["arguments"] for r in example_replies(tool)] == [
        {"uci": "e2e4"},
        {"uci": "..."},
    ]


def test_the_first_reply_the_envs_step_accepts_is_kept(wordle_url):
    where = ["--base-url", wordle_url]
    # Not an action of Wordle's (refused by the parser), then a guess.
    reply, report = accepted_reply(where, ['{"move": 1}', "[crane]"])
    assert reply == "[crane]"
    assert report["step"]["action"]["message"] == "[crane]"
    assert "You submitted [crane]" in report["step"]["observation"]["prompt"]
    with pytest.raises(InitError) as refused:
        accepted_reply(where, ['{"move": 1}'])
    assert "the env's step took none of the actions built from its action" in str(
        refused.value
    )
    assert "'{\"move\": 1}': --action is not a valid action" in str(refused.value)


def test_an_mcp_server_without_a_seed_gets_one_empty_reset_and_a_tool_call(
    tmp_path, counter_url
):
    """A running server (no source to read): the counter's reset shows nothing a seed
    changes, so one empty reset; the action a call of its first tool, stepped."""
    args = Namespace(
        name="counter-v1", dir=str(tmp_path), base_url=counter_url, env=None, app=None
    )
    assert run_init(args) == 0
    module = (tmp_path / "counter-v1" / "counter_v1" / "__init__.py").read_text()
    assert "RESETS: list[dict[str, Any]] | None = [{}]\n" in module
    assert "check found no\n`seed` that the env's `reset` takes" in module
    reply = json.loads(module.split("REPLY: str = ")[1].split("\n")[0][1:-1])
    assert reply == {"type": "call_tool", "tool_name": "add", "arguments": {"n": 0}}
