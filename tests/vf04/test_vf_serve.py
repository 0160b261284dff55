"""verifiers 0.4's env server (`serve_env`), the path prime-rl trains through: the
env is served over ZMQ from its own process (or a broker over worker processes) and
rollouts are asked for with `EnvClient.run`, task by task."""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from tests.servers import (
    COUNTER_SCRIPT,
    ROOT,
    WORDLE_APP,
    WORDLE_PROJECT,
    eval_environ,
    free_port,
    policy_server,
    stop,
    wordle_uv_servers,
)
from tests.vf04.test_vf_eval import wait_until


@contextlib.contextmanager
def env_server(taskset: dict, workers: int = 1) -> Iterator[tuple[str, int]]:
    """`serve_env` for an `openenv-v1` taskset config, in a process group of its
    own; yields its address and pid, and stops it (`stop`: SIGTERM, then SIGKILL)."""
    address = f"tcp://127.0.0.1:{free_port()}"
    config = json.dumps({"taskset": {"id": "openenv-v1", **taskset}})
    cmd = [sys.executable, "-m", "tests.vf04.env_server", address, config]
    proc = subprocess.Popen(
        [*cmd, str(workers)], cwd=ROOT, env=eval_environ(), start_new_session=True
    )
    try:
        yield address, proc.pid
    finally:
        stop(proc)


async def run_tasks(address: str, policy: str, tasks: list[dict]) -> list:
    """Each task run once through the env server, at the same time; their episodes."""
    from verifiers.v1 import SamplingConfig
    from verifiers.v1.configs.client import EvalClientConfig
    from verifiers.v1.serve import EnvClient

    client = EnvClient(address)
    try:
        await client.wait_for_server_startup(timeout=120)
        model = EvalClientConfig(base_url=policy, api_key_var="LOCAL_POLICY_KEY")
        return await asyncio.gather(
            *(
                client.run(model, "local-policy", SamplingConfig(), task)
                for task in tasks
            )
        )
    finally:
        await client.close()


def task_data(**taskset) -> list[dict]:
    """The tasks of an `openenv-v1` taskset, as a trainer dispatches them."""
    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset

    taskset = OpenEnvTaskset(OpenEnvConfig(id="openenv-v1", **taskset))
    return [task.data.model_dump(mode="json") for task in taskset.load()]


def test_native_episodes_run_in_env_server_workers(counter_url):
    """A broker over two spawned workers; native tool calls step in the worker that
    plays the episode."""
    taskset = {
        "base_url": counter_url,
        "resets": [{"start": 1}, {"start": 1}],
        "tool_calls": "native",
    }
    with (
        policy_server("script", script=COUNTER_SCRIPT) as policy,
        env_server(taskset, workers=2) as (address, _),
    ):
        episodes = asyncio.run(run_tasks(address, policy, task_data(**taskset)))
    assert len(episodes) == 2
    for episode in episodes:
        (trace,) = episode.traces
        assert trace.errors == [], trace.errors
        assert trace.stop_condition == "openenv_done"
        assert trace.rewards["openenv_reward"].score == 0.25 + 0.0 + 0.25 + 1.0
        assert trace.info["openenv"]["steps"] == 4
        called = [
            call.name
            for node in trace.nodes
            for call in getattr(node.message, "tool_calls", None) or ()
        ]
        assert called == ["add", "peek", "add", "submit"]


def test_shared_uv_servers_live_with_the_env_server_and_die_with_it(tmp_path):
    """The env server starts the shared UV servers (the env's `start()`), its
    rollouts lease them, and a SIGKILL of the env server takes them down."""
    assert wordle_uv_servers() == []
    provider = {"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP}
    taskset = {
        "env": "local/wordle",
        "provider_kwargs": provider,
        "resets": [{"seed": 1}, {"seed": 2}, {"seed": 3}],
    }
    with (
        policy_server("solver") as policy,
        env_server(taskset) as (address, pid),
    ):
        episodes = asyncio.run(run_tasks(address, policy, task_data(**taskset)))
        rewards = [
            episode.traces[0].rewards["openenv_reward"].score for episode in episodes
        ]
        assert rewards == [1.0, 1.0, 1.0]
        stops = {episode.traces[0].stop_condition for episode in episodes}
        assert stops == {"openenv_done"}
        # The shared server outlives the episodes; it is the env server's.
        assert wordle_uv_servers()
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: wordle_uv_servers() == [], timeout=30), (
            wordle_uv_servers()
        )
