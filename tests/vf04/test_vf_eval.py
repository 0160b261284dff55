"""verifiers 0.4: full `vf-eval` runs through the CLI, as a user types them, against
real servers; the same checks the 0.2 binding passes (test_eval.py, test_faults.py,
test_process_ownership.py), with the same reward, stop and metric names. No harness
flag and no sandbox: the package's chat harness and the local runtime are the
defaults."""

import shutil
import signal
import subprocess
import time

import pytest

from tests import zygote
from tests.servers import (
    COUNTER_SCRIPT,
    ROOT,
    assert_crash_read_not_waited_out,
    eval_environ,
    free_port,
    model_flags,
    policy_server,
    recorded_requests,
    wait_until,
    wordle_uv_servers,
    wordle_uvicorns,
)
from tests.test_faults import faulty_server, move
from tests.vf04.evals import (
    read_episodes,
    run_vf_eval,
    traces_of,
    vf_eval_command,
    wordle_uv_flags,
)


def assert_all_done(proc, episodes, count):
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = traces_of(episodes)
    assert len(traces) == count, proc.stderr[-3000:]
    for episode in episodes:
        assert episode["ok"] and episode["errors"] == [], episode["errors"]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        account = trace["info"]["openenv"]
        assert trace["rewards"]["openenv_reward"]["score"] == account["reward"]
        assert trace["metrics"]["openenv_steps"] == account["steps"] >= 1
    return traces


def test_flag_only_base_url_eval_runs_every_reset_and_rollout(wordle_url, tmp_path):
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-v1",
                "--env.taskset.base-url",
                wordle_url,
                "--env.taskset.resets",
                '[{"seed": 1}, {"seed": 2}]',
                "-r",
                "2",
                "-c",
                "4",
                *model_flags(policy),
            ],
            tmp_path,
        )
    traces = assert_all_done(proc, episodes, 4)
    assert sorted(t["task"]["data"]["name"] for t in traces) == sorted(
        [f"{wordle_url}#0", f"{wordle_url}#0", f"{wordle_url}#1", f"{wordle_url}#1"]
    )
    # The solver solves both seeded games: reward 1.0 on the solving step only.
    assert [t["rewards"]["openenv_reward"]["score"] for t in traces] == [1.0] * 4
    # Locally, with this package's chat harness, unasked.
    for trace in traces:
        assert trace["agent"]["config"]["harness"]["id"] == "openenv-v1"
        assert trace["agent"]["config"]["runtime"]["type"] == "subprocess"


def test_reward_is_the_exact_sum_of_scripted_step_rewards(counter_url, tmp_path):
    with policy_server("script", script=COUNTER_SCRIPT) as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-v1",
                "--env.taskset.base-url",
                counter_url,
                "--env.taskset.resets",
                '[{"start": 1}]',
                *model_flags(policy),
            ],
            tmp_path,
        )
    (trace,) = assert_all_done(proc, episodes, 1)
    assert trace["rewards"]["openenv_reward"]["score"] == 0.25 + 0.0 + 0.25 + 1.0
    assert trace["metrics"]["openenv_steps"] == 4


def test_toml_with_a_uv_launch_runs_and_leaves_no_env_process(tmp_path):
    assert wordle_uv_servers() == []
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    (tmp_path / "envs").symlink_to(ROOT / "envs")
    with policy_server("solver") as policy:
        # The flag overrides the file's client URL (the policy runs on a free port).
        proc, episodes = run_vf_eval(
            ["@", "configs/vf04/wordle-local.toml", "--client.base-url", policy],
            tmp_path,
        )
    traces = assert_all_done(proc, episodes, 3)
    assert sorted(t["task"]["data"]["name"] for t in traces) == [
        f"openenv/wordle#{i}" for i in range(3)
    ]
    # One shared server for the eval, stopped with it.
    (log,) = tmp_path.glob("outputs/*/logs/attempt_1/eval.log")
    assert log.read_text().count("shared env server for openenv/wordle up at") == 1
    assert wait_until(lambda: wordle_uv_servers() == [], 10), wordle_uv_servers()


def test_wordle_wrapper_runs_against_a_base_url(wordle_url, tmp_path):
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-wordle-v1",
                "--env.taskset.base-url",
                wordle_url,
                "-n",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
        )
    traces = assert_all_done(proc, episodes, 2)
    # Connect only: the wrapper's pinned `env` gives way to the URL.
    assert {t["task"]["data"].get("env") for t in traces} == {None}
    assert {t["task"]["data"]["name"] for t in traces} == {
        f"{wordle_url}#0",
        f"{wordle_url}#1",
    }


@pytest.mark.parametrize("mode", ["wrong-field", "empty", "free-text"])
def test_misbehaving_policy_ends_cleanly_without_max_turns(mode, counter_url, tmp_path):
    with policy_server(mode) as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", counter_url] + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == []
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["metrics"]["openenv_steps"] == 0
    assert trace["info"]["openenv"]["stop_reason"] == "invalid_actions"


def test_no_env_fails_at_once_naming_the_flags(tmp_path):
    proc, _ = run_vf_eval(["openenv-v1", "-m", "m"], tmp_path, timeout=120)
    assert proc.returncode != 0
    assert "--env.taskset.env" in proc.stderr + proc.stdout
    assert "--env.taskset.base-url" in proc.stderr + proc.stdout


def test_closed_port_ends_the_rollout_fast_with_the_cause(tmp_path):
    closed = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", closed] + model_flags(policy),
            tmp_path,
        )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    (error,) = episode["errors"]
    assert error["type"] == "OpenEnvError"
    assert closed in error["message"] and "ECONNREFUSED" in error["message"]
    assert elapsed < 60


def test_wrong_app_ends_every_rollout_fast_with_the_servers_error(tmp_path):
    with policy_server("solver") as policy:
        proc, episodes = run_vf_eval(
            [
                *wordle_uv_flags('[{"seed": 1}, {"seed": 2}]', "wordle_env.nope:app"),
                "-c",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(episodes) == 2
    for episode in episodes:
        (error,) = episode["errors"]
        assert error["type"] == "OpenEnvError"
        assert "ModuleNotFoundError" in error["message"]
        assert "wordle_env.nope" in error["message"]
        assert "; check `--env.taskset.provider-kwargs.app` (" in error["message"]
        assert_crash_read_not_waited_out(error["message"])
    assert wordle_uv_servers() == []


def test_server_killed_mid_step_keeps_reward_and_steps_on_the_trace(tmp_path):
    script = [move("score", 2), move("score", 3), move("crash", 0)]
    with faulty_server() as (url, server), policy_server("script", script=script) as p:
        started = time.monotonic()
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", url, *model_flags(p)], tmp_path
        )
        elapsed = time.monotonic() - started
        assert server.poll() is not None, "the crash move should have killed it"
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    (trace,) = episode["traces"]
    (error,) = trace["errors"]
    assert error["type"] == "OpenEnvError"
    # The server is gone for good: resuming (on by default) finds nothing to
    # connect to, and says so after the step's own cause.
    assert error["message"].startswith(
        f"{url}: the env server was lost (ConnectionClosed"
    ), error["message"]
    assert "and resuming on a fresh session failed" in error["message"]
    assert error["message"].endswith("(after 2 steps)")
    account = trace["info"]["openenv"]
    assert (account["reward"], account["steps"]) == (5.0, 2)
    assert account["stop_reason"] == "error"
    assert trace["rewards"]["openenv_reward"]["score"] == 5.0
    assert elapsed < 120


@pytest.mark.parametrize(
    ("sig", "shared"),
    [(signal.SIGKILL, True), (signal.SIGKILL, False), (signal.SIGTERM, True)],
    ids=["sigkill-shared", "sigkill-per-rollout", "sigterm-shared"],
)
def test_signalled_eval_leaves_no_env_server(tmp_path, sig, shared):
    assert wordle_uv_servers() == []
    # A slow policy keeps the episodes in flight while the eval is killed.
    record = tmp_path / "requests.jsonl"
    with policy_server("slow", delay=120, record=record) as policy:
        eval_proc = zygote.start(
            vf_eval_command(
                [
                    *wordle_uv_flags('[{"seed": 1}, {"seed": 2}]'),
                    "--env.taskset.shared-servers",
                    str(shared).lower(),
                    "-c",
                    "2",
                    *model_flags(policy),
                ]
            ),
            cwd=tmp_path,
            env=eval_environ(),
        )
        try:
            expected = 1 if shared else 2
            assert wait_until(
                lambda: (
                    len(wordle_uvicorns()) >= expected or eval_proc.poll() is not None
                ),
                180,
            )
            assert eval_proc.poll() is None, "eval ended before the envs were up"
            # Both episodes have reached the model.
            assert wait_until(lambda: len(recorded_requests(record)) >= 2, 120)
        finally:
            eval_proc.send_signal(sig)
            try:
                eval_proc.wait(60)
            except subprocess.TimeoutExpired:
                eval_proc.kill()
                raise
        assert wait_until(lambda: wordle_uv_servers() == [], 20), wordle_uv_servers()
    if sig == signal.SIGKILL:
        assert read_episodes(tmp_path) == []


def test_docker_without_a_daemon_fails_fast_naming_docker(tmp_path):
    # The env runs in the eval process, so Docker is this host's: the client is
    # pointed at a daemon socket that does not exist.
    started = time.monotonic()
    proc, episodes = run_vf_eval(
        ["openenv-v1", "--env.taskset.env", "openenv/wordle"]
        + ["--env.taskset.use-docker", "true", *model_flags("http://127.0.0.1:9/v1")],
        tmp_path,
        environ={"DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    (error,) = episode["errors"]
    assert error["type"] == "OpenEnvError"
    assert "cannot launch openenv/wordle with Docker" in error["message"]
    assert "Cannot connect to the Docker daemon" in error["message"]
    assert time.monotonic() - started < 60


def test_docker_with_a_base_url_is_refused_naming_the_flags(tmp_path):
    proc, episodes = run_vf_eval(
        ["openenv-v1", "--env.taskset.base-url", "http://127.0.0.1:9"]
        + ["--env.taskset.use-docker", "true", "-m", "m"],
        tmp_path,
        timeout=120,
    )
    assert proc.returncode != 0 and episodes == []
    # vf-eval shows it in a box, wrapped: its lines joined again.
    said = " ".join(
        line.strip("│ ") for line in (proc.stderr + proc.stdout).splitlines()
    )
    assert "drop `--env.taskset.use-docker`" in said
    assert "drop `--env.taskset.base-url`" in said
