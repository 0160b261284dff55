"""verifiers 0.4: `vf-eval` with `provider = "swarm"` on a real one-node swarm: the
env built from its own Dockerfile runs as a two-task service published in host mode,
rollouts spread over both tasks, and the service, its containers and its network are
gone when the eval ends, or within 30 s of it being SIGKILLed."""

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
from tests.servers import model_flags, policy_server
from tests.test_docker_eval import container_starts
from tests.vf04.evals import run_vf_eval, vf_eval_command
from tests.vf04.test_vf_eval import assert_all_done

CODE_ENV_ON_SWARM = [
    *("openenv-v1", "--env.taskset.env", "test/code_env"),
    *("--env.taskset.provider", "swarm", "--env.taskset.provider-kwargs"),
    json.dumps(
        {
            "project_path": str(CODE_ENV),
            "publish": "host",
            "replicas": 2,
            "env_vars": {"MAX_SESSIONS": "2"},
        }
    ),
    *("--env.taskset.launch-timeout-s", "300"),
]


@pytest.mark.long  # waits on Swarm for most of its half minute
def test_vf_eval_runs_its_env_as_a_swarm_service_spread_over_its_tasks(
    real_swarm, tmp_path, monkeypatch
):
    run_id = f"test-vf04-swarm-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    monkeypatch.setenv("OPENENV_V1_RUN_ID", run_id)  # the eval inherits it
    started = time.time()
    try:
        with policy_server("script", script=['{"code": "print(6 * 7)"}']) as policy:
            proc, episodes = run_vf_eval(
                [*CODE_ENV_ON_SWARM, "-r", "4", "-c", "4", *model_flags(policy)],
                tmp_path,
                timeout=600,
            )
        traces = assert_all_done(proc, episodes, 4)
        assert [t["rewards"]["openenv_reward"]["score"] for t in traces] == [1.0] * 4
        # Two sessions each: both tasks served, and nothing is left.
        assert container_starts(label, started) == 2
        assert swarm_labelled(label) == {"service": [], "container": [], "network": []}
    finally:
        remove_swarm_labelled(label)


def test_a_sigkilled_vf_eval_leaves_no_service(real_swarm, tmp_path):
    run_id = f"test-vf04-swarm-kill-{os.getpid()}"
    with policy_server("slow", delay=600) as policy:
        command = vf_eval_command([*CODE_ENV_ON_SWARM, *model_flags(policy)])
        with labelled_eval(command, tmp_path, run_id) as (eval_proc, label):
            wait_for_containers(label, eval_proc, count=2)
            eval_proc.kill()
            eval_proc.wait(timeout=30)
            took = wait_until_swarm_gone(label, timeout_s=30)
            print(f"service gone {took:.1f}s after vf-eval was SIGKILLed")
