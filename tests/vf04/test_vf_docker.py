"""verifiers 0.4: `vf-eval` with Docker on this host and a real engine, text and
native tool calls, on an env built from its own Dockerfile: rollouts share one
container, and it is gone when the eval ends."""

from __future__ import annotations

import json
import os
import time

import pytest

from openenv_v1.core.docker_reaper import RUN_LABEL
from tests.real_docker import CODE_ENV, labelled, remove_labelled
from tests.servers import model_flags, policy_server
from tests.test_docker_eval import container_starts
from tests.vf04.evals import run_vf_eval
from tests.vf04.test_vf_eval import assert_all_done


@pytest.mark.parametrize("tool_calls", ["text", "native"])
def test_vf_eval_runs_an_env_folder_in_one_shared_container(
    real_docker, tool_calls, tmp_path, monkeypatch
):
    run_id = f"test-vf04-docker-{tool_calls}-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    monkeypatch.setenv("OPENENV_V1_RUN_ID", run_id)  # the eval inherits it
    started = time.time()
    try:
        with policy_server("script", script=['{"code": "print(6 * 7)"}']) as policy:
            proc, episodes = run_vf_eval(
                [
                    "openenv-v1",
                    "--env.taskset.env",
                    "test/code_env",
                    "--env.taskset.use-docker",
                    "true",
                    "--env.taskset.provider-kwargs",
                    json.dumps({"project_path": str(CODE_ENV)}),
                    "--env.taskset.launch-timeout-s",
                    "300",
                    "--env.taskset.tool-calls",
                    tool_calls,
                    "-r",
                    "3",
                    "-c",
                    "3",
                    *model_flags(policy),
                ],
                tmp_path,
                timeout=600,
            )
        traces = assert_all_done(proc, episodes, 3)
        assert [t["rewards"]["openenv_reward"]["score"] for t in traces] == [1.0] * 3
        assert container_starts(label, started) == 1
        assert labelled(label) == []
    finally:
        remove_labelled(label)
