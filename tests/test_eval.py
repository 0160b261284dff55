"""Full `eval` runs through the CLI, as a user types them, against real servers."""

import json
import os
import shutil
import time

import pytest

from openenv_v1.core.launch.uv import uv_bin_dir
from tests.servers import (
    NULL_HARNESS,
    ROOT,
    assert_crash_read_not_waited_out,
    free_port,
    model_flags,
    policy_server,
    run_eval,
    wordle_uv_flags,
    wordle_uv_servers,
)


def assert_all_done(proc, traces, count):
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == count, proc.stderr[-3000:]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        account = trace["info"]["openenv"]
        assert trace["rewards"]["openenv_reward"] == account["reward"]
        assert trace["metrics"]["openenv_steps"] == account["steps"] >= 1


def test_flag_only_base_url_eval_runs_every_reset_and_rollout(wordle_url, tmp_path):
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                wordle_url,
                "--taskset.resets",
                '[{"seed": 1}, {"seed": 2}]',
                "-r",
                "2",
                "-c",
                "4",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert_all_done(proc, traces, 4)
    assert sorted(t["task"]["data"]["name"] for t in traces) == sorted(
        [f"{wordle_url}#0", f"{wordle_url}#0", f"{wordle_url}#1", f"{wordle_url}#1"]
    )
    # The solver solves both seeded games: reward 1.0 on the solving step only.
    assert [t["rewards"]["openenv_reward"] for t in traces] == [1.0] * 4


def test_reward_is_the_exact_sum_of_scripted_step_rewards(counter_url, tmp_path):
    """Through verifiers' `null` harness (the other evals here use the package's
    default harness)."""
    script = [
        '{"tool_name": "add", "arguments": {"n": 2}}',
        '{"tool_name": "peek"}',
        '{"tool_name": "add", "arguments": {"n": 4}}',
        '{"tool_name": "submit", "arguments": {"answer": 7}}',
    ]
    with policy_server("script", script=script) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                counter_url,
                "--taskset.resets",
                '[{"start": 1}]',
                *NULL_HARNESS,
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert_all_done(proc, traces, 1)
    (trace,) = traces
    assert trace["rewards"]["openenv_reward"] == 0.25 + 0.0 + 0.25 + 1.0
    assert trace["metrics"]["openenv_steps"] == 4


def test_uv_launched_eval_completes_and_leaves_no_env_process(tmp_path):
    assert wordle_uv_servers() == []
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            [
                *wordle_uv_flags('[{"seed": 4}, {"seed": 5}]'),
                "-c",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert_all_done(proc, traces, 2)
    # The adapter's own log lines land in the run's log, next to verifiers' own.
    (log,) = tmp_path.glob("outputs/*/*/eval.log")
    assert log.read_text().count("shared env server for local/wordle up at") == 1
    deadline = time.monotonic() + 10
    while wordle_uv_servers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert wordle_uv_servers() == []


@pytest.fixture(scope="module")
def wrapper_eval(wordle_url, tmp_path_factory):
    """One `openenv-wordle-v1` eval of two tasks against a base_url, with
    `provider_kwargs` for a launch given too, and `uv` and `git` stand-ins first on
    PATH that record every call (and run the real tool, which verifiers itself uses);
    its process, traces and the recorded calls. The tests below read it."""
    tmp_path = tmp_path_factory.mktemp("wrapper_eval")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    calls = tmp_path / "calls.log"
    for tool in ("uv", "git"):
        real = shutil.which(tool) or uv_bin_dir() + "/uv"
        script = fake_bin / tool
        script.write_text(
            f'#!/bin/sh\necho "{tool} $*" >> "{calls}"\nexec "{real}" "$@"\n'
        )
        script.chmod(0o755)
    provider = json.dumps({"project_path": str(ROOT / "envs" / "wordle"), "port": 1})
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            [
                "openenv-wordle-v1",
                "--taskset.base-url",
                wordle_url,
                "--taskset.task.user.provider-kwargs",
                provider,
                "-n",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
            env={"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"},
        )
    recorded = calls.read_text().splitlines() if calls.exists() else []
    return proc, traces, recorded


# Both read the one `wrapper_eval`: in one pytest-xdist worker, so it runs once.
@pytest.mark.xdist_group("wrapper_eval")
def test_wordle_wrapper_runs_against_a_base_url(wrapper_eval):
    proc, traces, _ = wrapper_eval
    assert_all_done(proc, traces, 2)
    assert {t["task"]["data"]["reset"]["seed"] for t in traces} == {0, 1}


@pytest.mark.xdist_group("wrapper_eval")
def test_base_url_launches_and_clones_nothing(wrapper_eval):
    """The Wordle wrapper pins `env` and an `app`; with a base_url none of it is used,
    nor the `provider_kwargs` given for a launch: nothing is cloned and no env server
    is run."""
    proc, traces, recorded = wrapper_eval
    assert_all_done(proc, traces, 2)
    # verifiers runs `git rev-parse` on itself; a Space would need `git clone`.
    assert not [c for c in recorded if c.startswith("git") and " clone " in c], recorded
    assert not [c for c in recorded if "uvicorn" in c or "--isolated" in c], recorded


def test_shipped_config_file_runs(tmp_path):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    (tmp_path / "envs").symlink_to(ROOT / "envs")
    with policy_server("solver") as policy:
        # The flag overrides the file's client URL (the policy runs on a free port).
        proc, traces = run_eval(
            [
                "@",
                "configs/wordle-local.toml",
                "--client.base-url",
                policy,
                "-n",
                "2",
            ],
            tmp_path,
        )
    assert_all_done(proc, traces, 2)


def test_closed_port_ends_the_rollout_fast_with_the_cause(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", closed] + model_flags(policy),
            tmp_path,
        )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    assert closed in error["message"] and "ECONNREFUSED" in error["message"]
    assert elapsed < 60


def test_wrong_app_ends_every_rollout_fast_with_the_servers_error(tmp_path):
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            [
                *wordle_uv_flags('[{"seed": 1}, {"seed": 2}]', "wordle_env.nope:app"),
                "-c",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2
    for trace in traces:
        (error,) = trace["errors"]
        assert error["type"] == "UserError"
        assert "ModuleNotFoundError" in error["message"]
        assert "wordle_env.nope" in error["message"]
        assert "; check `--taskset.task.user.provider-kwargs.app` (" in error["message"]
        assert_crash_read_not_waited_out(error["message"])
    assert wordle_uv_servers() == []


@pytest.mark.parametrize("mode", ["wrong-field", "empty", "free-text"])
def test_misbehaving_policy_ends_cleanly_without_max_turns(mode, counter_url, tmp_path):
    with policy_server(mode) as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", counter_url] + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    assert trace["errors"] == []
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["metrics"]["openenv_steps"] == 0
