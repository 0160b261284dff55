"""The same launch failure names a setting that exists where the user met it: in a
verifiers 0.2 `eval`, its flags (here a shared server's failure, formed in the eval
process, reaches the rollout as text over the pool's endpoint); in `openenv-v1
check`, its flags. A wrong app is checked in test_eval.py and test_cli.py; the
verifiers 0.4 runs are tests/vf04/test_vf_setting_names.py."""

import json

from tests.servers import (
    TEST_ENVS,
    WORDLE_PROJECT,
    model_flags,
    policy_server,
    processes_matching,
    run_cli,
    run_eval,
    wait_until,
)

SLOW_APP = "slow_start:app"  # ten minutes to import: a launch that is still starting
SLOW_KWARGS = {
    "project_path": str(WORDLE_PROJECT),
    "app": SLOW_APP,
    "env_vars": {"PYTHONPATH": str(TEST_ENVS)},
}
MISSING = "/nonexistent/openenv-env"


def eval_error(tmp_path, *flags: str) -> str:
    """The one rollout's error of an `eval` of `local/x` with `flags`."""
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.env", "local/x", *flags, *model_flags(policy)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    return error["message"]


def test_eval_launch_timeout_names_the_eval_flag(tmp_path):
    message = eval_error(
        tmp_path,
        *("--taskset.task.user.provider-kwargs", json.dumps(SLOW_KWARGS)),
        *("--taskset.task.user.launch-timeout-s", "5"),
    )
    assert "was not ready within 5s" in message
    assert "(raise `--taskset.task.user.launch-timeout-s` if it is just slow)" in (
        message
    )
    assert wait_until(lambda: processes_matching(SLOW_APP) == [], 30)


def test_eval_missing_project_path_names_the_eval_flag(tmp_path):
    """The shared servers' pool starts as the taskset is built: the eval fails
    there, before any rollout."""
    kwargs = json.dumps({"project_path": MISSING})
    proc, traces = run_eval(
        ["openenv-v1", "--taskset.env", "local/x"]
        + ["--taskset.task.user.provider-kwargs", kwargs, "-m", "m"],
        tmp_path,
    )
    assert proc.returncode == 1 and traces == [], proc.stderr[-3000:]
    assert (
        f"ValueError: project_path {MISSING!r} is not a directory; set "
        "`--taskset.task.user.provider-kwargs.project-path` to the env's source "
        "checkout"
    ) in proc.stderr


def test_check_launch_timeout_names_the_check_flag():
    proc = run_cli(
        *("check", "local/x", "--launch-timeout", "5", "--json"),
        *("--provider-kwargs", json.dumps(SLOW_KWARGS)),
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = json.loads(proc.stdout)["failure"]
    assert failure["stage"] == "launch"
    assert "was not ready within 5s" in failure["error"]
    assert "(raise `--launch-timeout` if it is just slow)" in failure["error"]
    assert failure["hint"] is None  # the error says the fix
    assert wait_until(lambda: processes_matching(SLOW_APP) == [], 30)


def test_check_missing_project_path_names_the_check_flag():
    proc = run_cli("check", "local/x", "--project-path", MISSING, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failure = json.loads(proc.stdout)["failure"]
    assert failure["stage"] == "launch"
    assert (
        f"project_path {MISSING!r} is not a directory; set `--project-path` to the "
        "env's source checkout"
    ) in failure["error"]
