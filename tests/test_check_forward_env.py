"""`openenv-v1 check --forward-env NAME` passes a variable of the caller's
environment into the launched server, as `forward_env` does for a rollout, and
nothing else of it: a real `check` of the snoop env, which reports what its server
process sees."""

import json
import os

from openenv_v1.core.launch.server_env import HOME_VAR, user_uv_cache_dir
from tests.isolation import SNOOP_APP, SNOOP_COMMAND, SNOOP_PROJECT, read_reports
from tests.servers import run_cli

NAME = "OPENENV_V1_TEST_FORWARDED"


def test_check_forwards_only_the_named_variables(tmp_path):
    """Also: the server's HOME is the one settled for the eval (here through
    `OPENENV_V1_SERVER_HOME`, as verifiers 0.2's simulators inherit it), uv's cache
    the user's."""
    value, kept = f"v-{os.getpid()}", f"k-{os.getpid()}"
    home = tmp_path / "home"
    home.mkdir()
    kwargs = {"env_vars": {"SNOOP_REPORT_DIR": str(tmp_path)}}
    proc = run_cli(
        "check",
        "--project-path",
        str(SNOOP_PROJECT),
        "--app",
        SNOOP_APP,
        "--provider-kwargs",
        json.dumps(kwargs),
        "--forward-env",
        NAME,
        "--action",
        SNOOP_COMMAND,
        "--probe-sessions",
        "0",
        "--json",
        env={
            **os.environ,
            NAME: value,
            "OPENENV_V1_TEST_KEPT_API_KEY": kept,
            HOME_VAR: str(home),
        },
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    (report,) = read_reports(tmp_path)
    assert report["env"][NAME] == value
    assert "OPENENV_V1_TEST_KEPT_API_KEY" not in report["env"]
    assert report["env"]["HOME"] == str(home)
    assert report["env"]["UV_CACHE_DIR"] == user_uv_cache_dir()


def test_check_names_a_forwarded_variable_that_is_not_set():
    proc = run_cli(
        "check",
        "local/x",
        "--forward-env",
        NAME,
        env={k: v for k, v in os.environ.items() if k != NAME},
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"--forward-env {NAME}: not set in this environment" in proc.stderr
