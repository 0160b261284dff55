"""verifiers 0.4: a setting the core names is rendered as this line's flag, a field of
its config (in process), and the launch failures of test_failures_name_settings.py
name it in a real `vf-eval` (a wrong app: test_vf_eval.py)."""

import json

import pytest
from pydantic import ValidationError

from openenv_v1 import OpenEnvConfig
from openenv_v1.core.setting_names import render_settings, setting
from openenv_v1.vf04.flags import VF_EVAL_FLAGS
from tests.servers import model_flags, policy_server, processes_matching, wait_until
from tests.setting_spellings import SPELLINGS, field_at
from tests.test_failures_name_settings import MISSING, SLOW_APP, SLOW_KWARGS
from tests.vf04.evals import run_vf_eval


@pytest.mark.parametrize("name", SPELLINGS)
def test_the_verifiers_04_spelling_is_a_field_of_its_config(name):
    flag = SPELLINGS[name][1]
    assert render_settings(setting(name), VF_EVAL_FLAGS) == f"`{flag}`"
    assert field_at(OpenEnvConfig, flag, "--env.taskset.")


def vf_eval_error(tmp_path, *flags: str) -> str:
    """The one episode's error of a `vf-eval` of `local/x` with `flags`."""
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.env", "local/x", *flags]
            + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    (error,) = episode["errors"]
    assert error["type"] == "OpenEnvError"
    return error["message"]


def test_vf_eval_launch_timeout_names_the_vf_eval_flag(tmp_path):
    message = vf_eval_error(
        tmp_path,
        *("--env.taskset.provider-kwargs", json.dumps(SLOW_KWARGS)),
        *("--env.taskset.launch-timeout-s", "5"),
    )
    assert "was not ready within 5s" in message
    assert "(raise `--env.taskset.launch-timeout-s` if it is just slow)" in message
    assert wait_until(lambda: processes_matching(SLOW_APP) == [], 30)


def test_vf_eval_missing_project_path_names_the_vf_eval_flag(tmp_path):
    """The shared servers' pool starts with the env: the eval fails there, before
    any episode."""
    kwargs = json.dumps({"project_path": MISSING})
    proc, episodes = run_vf_eval(
        ["openenv-v1", "--env.taskset.env", "local/x"]
        + ["--env.taskset.provider-kwargs", kwargs, "-m", "m"],
        tmp_path,
    )
    assert proc.returncode == 1 and episodes == [], proc.stderr[-3000:]
    assert (
        f"ValueError: project_path {MISSING!r} is not a directory; set "
        "`--env.taskset.provider-kwargs.project-path` to the env's source checkout"
    ) in proc.stderr


def test_a_launch_with_a_base_url_is_refused_naming_the_vf_eval_flags():
    with pytest.raises(ValidationError) as info:
        OpenEnvConfig(base_url="http://127.0.0.1:9", provider="modal")
    assert "drop `--env.taskset.provider`, or drop `--env.taskset.base-url`" in str(
        info.value
    )
    with pytest.raises(ValueError) as raised:
        OpenEnvConfig(id="openenv-v1").require_target("openenv-v1")
    assert "pass `--env.taskset.env` <org/name> (launched with UV) or " in str(
        raised.value
    )
