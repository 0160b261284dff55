"""An episode outlives its Swarm task: on a real one-node swarm, a pool of a 2-task
service (each task reached through its loopback gateway, `publish` "local"), the
task's container or its gateway killed mid-episode; the pool takes that server out,
and the episode resumes by replay on the other task, ending as an undisturbed
episode of the same pool does.

The env is `tests/envs/docker/code_env` (one step per episode: the step runs the code
sent; exit status 0 pays 1.0), so the loss falls between the reset and the step and
the replay is the reset's (its observation checked against the first session's).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from urllib.parse import urlsplit

import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.docker.reaper import OWNER_LABEL, owner_token
from openenv_v1.core.launch.pool import ServerPool
from tests import docker_engine
from tests.real_docker import (
    CODE_ENV,
    docker_json,
    remove_swarm_labelled,
    swarm_labelled,
    wait_until_swarm_gone,
)

ENV = "test/code_env"
ACTION = '{"code": "print(6 * 7)"}'


@pytest.fixture
def mine(real_swarm):
    """The owner label of this test process's services, containers and networks;
    any left are removed."""
    label = f"{OWNER_LABEL}={owner_token()}"
    yield label
    remove_swarm_labelled(label)


async def play(target: EnvTarget, kill=None):
    """One episode: reset, then `kill()` if given, then the step. Its report and the
    URLs of its first and last sessions."""
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(), stack)
        await episode.reset({"seed": 1})
        first = episode.client.base_url
        if kill is not None:
            kill(first)
        await episode.act(ACTION)
        return episode.report, first, episode.client.base_url


def containers_behind(label: str, url: str) -> tuple[str, str]:
    """(gateway container, task container) of the server at `url`: the gateway
    published on its port, and the task at the address the gateway forwards to."""
    port = urlsplit(url).port
    containers = docker_json("inspect", *swarm_labelled(label)["container"])
    [gateway] = [
        c
        for c in containers
        if c["Name"].startswith("/openenv-v1-gateway")
        and c["NetworkSettings"]["Ports"]["8000/tcp"][0]["HostPort"] == str(port)
    ]
    address = gateway["Args"][-3]  # python3 -c FORWARDER ADDRESS PORT LISTEN
    [task] = [
        c
        for c in containers
        if "com.docker.swarm.task.id" in c["Config"]["Labels"]
        and address
        in {n["IPAddress"] for n in c["NetworkSettings"]["Networks"].values()}
    ]
    return gateway["Id"], task["Id"]


@pytest.mark.long  # waits on Swarm for most of its half minute
@pytest.mark.parametrize("killed", ["task", "gateway"])
async def test_a_swarm_task_lost_mid_episode_is_resumed_on_another(mine, killed):
    target = EnvTarget(
        env=ENV,
        provider="swarm",
        provider_kwargs={"project_path": str(CODE_ENV), "replicas": 2},
        launch_timeout_s=180,
    )
    pool = ServerPool(target, max_servers=2)
    leased = EnvTarget(env=ENV, pool=pool.local(), connect_timeout_s=10)
    gone: list[str] = []

    def kill(url: str) -> None:
        gateway, task = containers_behind(mine, url)
        gone.append(task if killed == "task" else gateway)
        docker_engine.docker("kill", gone[-1])

    try:
        calm, _, _ = await play(leased)
        assert (calm.error, calm.done, calm.steps, calm.reward) == (None, True, 1, 1.0)
        report, lost, moved = await play(leased, kill)
        assert report.error is None, report.error
        assert (report.done, report.steps, report.reward) == (True, 1, calm.reward)
        assert report.step_rewards == calm.step_rewards
        [resume] = report.resumes
        assert resume["replayed_steps"] == 0 and resume["server"] == moved != lost
        # The pool takes the lost server out (once its /health probes fail); the
        # other task served the replay and stays.
        deadline = time.monotonic() + 30
        while lost in pool.servers():
            assert time.monotonic() < deadline, pool.servers()
            await asyncio.sleep(0.2)
        assert moved in pool.servers()
    finally:
        pool.close()
    wait_until_swarm_gone(mine, timeout_s=30)
