"""verifiers 0.2 `eval` with `provider = "swarm"` on a real one-node swarm: the env
built from its own Dockerfile runs as a service of two tasks published in host mode,
rollouts spread over both, and the service, its containers and its network are gone
when the eval ends, or within 30 s of it being SIGKILLed."""

from __future__ import annotations

import json
import os
import time

import pytest

from openenv_v1.core.launch.docker.reaper import RUN_LABEL
from tests.real_docker import (
    CODE_ENV,
    labelled_eval,
    remove_swarm_labelled,
    swarm_labelled,
    wait_for_containers,
    wait_until_swarm_gone,
)
from tests.servers import BIN, model_flags, policy_server, run_cli, run_eval
from tests.test_docker_eval import container_starts
from tests.test_eval import assert_all_done

CODE_ENV_ON_SWARM = [
    *("openenv-v1", "--taskset.env", "test/code_env", "--taskset.provider", "swarm"),
    "--taskset.task.user.provider-kwargs",
    json.dumps(
        {
            "project_path": str(CODE_ENV),
            "publish": "host",
            "replicas": 2,
            "env_vars": {"MAX_SESSIONS": "2"},
        }
    ),
    *("--taskset.task.user.launch-timeout-s", "300"),
]
"""`eval` flags running the code env as a two-task Swarm service."""


@pytest.mark.long  # waits on Swarm for most of its half minute
def test_eval_runs_its_env_as_a_swarm_service_spread_over_its_tasks(
    real_swarm, tmp_path
):
    run_id = f"test-eval-swarm-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    started = time.time()
    try:
        with policy_server("script", script=['{"code": "print(6 * 7)"}']) as policy:
            proc, traces = run_eval(
                [*CODE_ENV_ON_SWARM, "-r", "4", "-c", "4"] + model_flags(policy),
                tmp_path,
                timeout=600,
                env={"OPENENV_V1_RUN_ID": run_id},
            )
        assert_all_done(proc, traces, 4)
        assert [t["rewards"]["openenv_reward"] for t in traces] == [1.0] * 4
        # Two tasks (two sessions each) served the four rollouts at once, and the
        # service, its containers and its network went with the eval.
        assert container_starts(label, started) == 2
        assert swarm_labelled(label) == {"service": [], "container": [], "network": []}
    finally:
        remove_swarm_labelled(label)


def test_a_sigkilled_eval_leaves_no_service(real_swarm, tmp_path):
    run_id = f"test-eval-swarm-kill-{os.getpid()}"
    with policy_server("slow", delay=600) as policy:
        command = [str(BIN / "eval"), *CODE_ENV_ON_SWARM]
        command += [*model_flags(policy), "--no-push"]
        with labelled_eval(command, tmp_path, run_id) as (eval_proc, label):
            wait_for_containers(label, eval_proc, count=2)
            eval_proc.kill()
            eval_proc.wait(timeout=30)
            took = wait_until_swarm_gone(label, timeout_s=30)
            print(f"service gone {took:.1f}s after the eval was SIGKILLed")


@pytest.mark.long  # waits on Swarm for most of its half minute
def test_check_runs_an_env_as_a_swarm_service(real_swarm):
    """`openenv-v1 check --provider swarm`: the env's checks pass through a task of
    its service, and nothing is left after it."""
    run_id = f"test-check-swarm-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    kwargs = {"publish": "host", "replicas": 1}
    try:
        done = run_cli(
            *("check", "test/code_env"),
            *("--provider", "swarm", "--project-path", str(CODE_ENV)),
            *("--provider-kwargs", json.dumps(kwargs), "--launch-timeout", "300"),
            *("--action", '{"code": "print(6 * 7)"}', "--json"),
            timeout=600,
            env={**os.environ, "OPENENV_V1_RUN_ID": run_id},
        )
        report = json.loads(done.stdout or "{}")
        assert report.get("ok"), done.stdout + done.stderr
        assert report["target"]["provider"] == "swarm"
        assert report["step"]["observation"]["stdout"] == "42\n"
        assert report["step"]["reward"] == 1.0
        assert swarm_labelled(label) == {"service": [], "container": [], "network": []}
    finally:
        remove_swarm_labelled(label)
