"""What an env folder's files say it needs from its server's environment
(`core/launch/env_project.py`: `EnvProject.variables`, `lacking_variables`,
`explain_lacking`), and which replies leave no episode to play
(`core/episode/view.py`: `reset_refusal`, `said_failure`). In process: the folders
are written here; tests/test_ended_at_reset.py runs them."""

from pathlib import Path

import pytest

from openenv_v1.core.episode.view import reset_refusal, said_failure
from openenv_v1.core.launch.env_project import (
    EnvProject,
    credential_name,
    explain_lacking,
    lacking_variables,
    passed_variables,
)
from openenv_v1.core.setting_names import render_settings
from openenv_v1.vf02.flags import EVAL_FLAGS
from tests.servers import TEST_ENVS

SERVER = """
import os

KEY = os.environ.get("SERVICE_API_KEY")
TOKEN = os.environ["HUB_TOKEN"]
SECRET = os.getenv("DB_PASSWORD", "")
WORKERS = int(os.getenv("MAX_WORKERS", "4"))
MODE = os.environ.get("GAME_MODE")
LEVEL = os.environ["UNLISTED_LEVEL"]
os.environ["OUTPUT_TOKEN"] = "set here, not read"
"""


def write_env(root: Path, server: str = SERVER) -> Path:
    (root / "server").mkdir(parents=True)
    (root / "server" / "app.py").write_text(server)
    (root / ".env.example").write_text("SERVICE_API_KEY=...\nMAX_WORKERS=4\n")
    (root / "README.md").write_text("Set `GAME_MODE` to `easy` or `hard`.\n")
    return root


def names(variables) -> list[str]:
    return [v.name for v in variables]


def test_an_env_needs_the_credentials_it_reads_and_the_listed_variables_it_requires(
    tmp_path,
):
    """Credentials count however they are read; another variable only when the
    env's files list it and some read has no default; a variable it sets does not
    count, nor its client's or its tests' reads."""
    root = write_env(tmp_path / "env")
    (root / "client.py").write_text('import os\nos.environ["CLIENT_API_KEY"]\n')
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text('os.getenv("TEST_ONLY_TOKEN")\n')
    found = EnvProject.read(root).variables()
    assert names(found) == [
        "DB_PASSWORD",
        "HUB_TOKEN",
        "SERVICE_API_KEY",
        "GAME_MODE",
    ]
    key = found[2]
    assert key.credential and key.read_in == ("server/app.py",)
    assert key.where == "read in server/app.py; listed in .env.example"
    assert found[3].where == "read in server/app.py; listed in README.md"


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("E2B_API_KEY", True),
        ("HF_TOKEN", True),
        ("GITEA_PASSWORD", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("MONKEY_MODE", False),
        ("MAX_CONCURRENT_ENVS", False),
        ("PWD", False),
    ],
)
def test_a_credential_is_told_by_a_part_of_its_name(name, credential):
    assert credential_name(name) is credential


def test_what_a_launch_passes_does_not_lack():
    passed = passed_variables(
        {"env_vars": {"GAME_MODE": "easy"}}, ["SERVICE_API_KEY", "HUB_TOKEN"]
    )
    assert passed == {"GAME_MODE", "SERVICE_API_KEY", "HUB_TOKEN"}


def test_lacking_variables_are_those_the_launch_does_not_pass(tmp_path):
    root = write_env(tmp_path / "env")
    lacking = lacking_variables(root, {"HUB_TOKEN", "GAME_MODE", "DB_PASSWORD"})
    assert names(lacking) == ["SERVICE_API_KEY"]
    assert lacking_variables(None, ()) == ()


def test_a_reset_that_left_no_episode_names_every_variable_lacking(tmp_path):
    root = str(write_env(tmp_path / "env"))
    text = explain_lacking(
        "reset ended it", True, source_dir=root, passed={"HUB_TOKEN", "DB_PASSWORD"}
    )
    assert text.startswith("reset ended it. the env's own files say it reads ")
    assert "SERVICE_API_KEY (read in server/app.py; listed in .env.example)" in text
    assert "GAME_MODE (read in server/app.py; listed in README.md)" in text
    assert "HUB_TOKEN" not in text
    assert "`forward_env`" in text
    rendered = render_settings(text, EVAL_FLAGS)
    assert "`--taskset.task.user.forward-env`" in rendered


def test_a_later_failure_names_only_the_lacking_variables_it_mentions(tmp_path):
    root = str(write_env(tmp_path / "env"))
    passed = {"GAME_MODE"}
    failure = "step failed: KeyError: 'HUB_TOKEN'"
    text = explain_lacking(failure, False, source_dir=root, passed=passed)
    assert "reads HUB_TOKEN (read in server/app.py)" in text
    assert "SERVICE_API_KEY" not in text
    unrelated = "step failed: connection reset"
    assert explain_lacking(unrelated, False, source_dir=root, passed=passed) == (
        unrelated
    )


def test_an_env_that_reads_nothing_needs_nothing(tmp_path):
    root = write_env(tmp_path / "env", server="print('hi')\n")
    assert EnvProject.read(root).variables() == ()
    assert explain_lacking("x", True, source_dir=str(root), passed=()) == "x"


def test_the_test_env_keyed_env_needs_its_service_key_and_token():
    key, token = EnvProject.read(TEST_ENVS / "keyed_env").variables()
    assert key.name == "TEST_SERVICE_API_KEY"
    assert key.listed_in == (".env.example",)
    assert token.name == "TEST_SERVICE_UPLOAD_TOKEN" and token.listed_in == ()


def test_a_reset_that_ends_the_episode_leaves_none_to_play():
    """Whatever the reply shows; with its reason when it gives one (openenv 0.10
    servers keep `metadata`)."""
    assert reset_refusal({"message": ""}, done=True) == (
        "the env ended the episode at its reset (`done: true` before any step)"
    )
    said = {"metadata": {"status": "error", "error": "E2B_API_KEY is not set."}}
    assert reset_refusal(said, done=True) == (
        "the env ended the episode at its reset (`done: true` before any step): "
        "E2B_API_KEY is not set."
    )


def test_a_reset_whose_reply_carries_an_error_failed():
    """agent_world_model_env answers a reset it cannot do with `error`, not done."""
    reply = {"error": "Scenario 'x' not found", "reward_type": "reset_error"}
    assert reset_refusal(reply, done=False) == (
        "the env's reset failed: Scenario 'x' not found"
    )
    assert reset_refusal({"error": None, "success": True, "text": "go"}, False) is None
    assert reset_refusal({"message": "Guess a word."}, done=False) is None


def test_only_an_error_status_says_a_step_failed():
    """A step's `error` or `success: false` is the env telling the model how its
    action went (a traceback, a failed command): play, not a failure."""
    assert said_failure({"status": "error", "message": "Setup command failed."}) == (
        "Setup command failed."
    )
    assert said_failure({"metadata": {"status": "failed"}}) == "status 'failed'"
    assert said_failure({"error": "NameError: x", "success": False}) is None
    assert said_failure({"status": "playing"}) is None
