"""Swarm launches on a real one-node swarm: a service built from the env's folder,
its tasks as the pool's servers in host mode, the routing mesh's service at its
boundary (this kernel has no IPVS), and nothing left behind however the owner ends.

The env is `tests/envs/docker/code_env` (it runs the Python code a step sends; its
`MAX_SESSIONS` is the server's session limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from openenv_v1.core import EnvFailure, EnvTarget, open_env
from openenv_v1.core.launch.docker.image import EnvImage, ensure_env_image
from openenv_v1.core.launch.docker.reaper import (
    MANAGED_LABEL,
    OWNER_LABEL,
    RUN_LABEL,
    host_prefix,
    owner_token,
    pid_namespace,
    sweep_orphans,
)
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.launch.swarm.options import SwarmOptions
from openenv_v1.core.launch.swarm.replica import swarm_launch_plan
from openenv_v1.core.launch.swarm.service import SwarmService
from tests import docker_engine
from tests.real_docker import (
    CODE_ENV,
    docker_json,
    remove_swarm_labelled,
    swarm_labelled,
    wait_until_swarm_gone,
)

ROOT = Path(__file__).resolve().parent.parent
ENV = "test/code_env"


def swarm_target(**kwargs) -> EnvTarget:
    return EnvTarget(
        env=ENV,
        provider="swarm",
        provider_kwargs={"project_path": str(CODE_ENV), **kwargs},
        launch_timeout_s=180,
    )


@pytest.fixture
def mine(real_swarm):
    """The owner label of this test process's services, containers and networks;
    any left are removed."""
    label = f"{OWNER_LABEL}={owner_token()}"
    yield label
    remove_swarm_labelled(label)


def service_spec(label: str) -> dict:
    (service,) = swarm_labelled(label)["service"]
    (info,) = docker_json("service", "inspect", service)
    return info


@pytest.mark.long  # waits on Swarm for most of its half minute
def test_host_mode_tasks_are_servers_the_pool_spreads_sessions_over(mine):
    """Two tasks, each its own server on its own port; with one session each, a
    third session at once scales the service up by a task. The service carries the
    limits and labels, and it and its network go when the pool closes."""
    target = swarm_target(
        publish="host",
        replicas=2,
        pids_limit=300,
        memory="1g",
        env_vars={"MAX_SESSIONS": "1", "MARK": "from env_vars"},
    )
    target = EnvTarget(**{**target.__dict__, "secret_env": {"SECRET": "s3cret"}})
    pool = ServerPool(target, max_servers=3)
    leased = EnvTarget(env=ENV, pool=pool.local())
    assert pool.launched() == 2  # every task of the service, from the start

    async def one_session(barrier: asyncio.Barrier) -> tuple[str, str]:
        async with contextlib.AsyncExitStack() as stack:
            client = await open_env(leased, stack)
            await client.reset()
            code = "import os; print(os.environ['MARK'], os.environ['SECRET'])"
            result = await client.step({"code": code})
            await barrier.wait()  # all three sessions are open at once
            return client.base_url, result.observation["stdout"]

    async def three_at_once() -> list[tuple[str, str]]:
        barrier = asyncio.Barrier(3)
        return await asyncio.gather(*(one_session(barrier) for _ in range(3)))

    try:
        sessions = asyncio.run(three_at_once())
        assert [out for _, out in sessions] == ["from env_vars s3cret\n"] * 3
        # Three sessions on three tasks: the two started, one added when both were
        # full; each published on its own port.
        urls = {url for url, _ in sessions}
        assert len(urls) == 3 and len(set(pool.servers())) == 3
        spec = service_spec(mine)
        assert spec["Spec"]["Mode"]["Replicated"]["Replicas"] == 3
        (port,) = spec["Spec"]["EndpointSpec"]["Ports"]
        assert port["PublishMode"] == "host" and port["TargetPort"] == 8000
        assert spec["Spec"]["EndpointSpec"]["Mode"] == "dnsrr"
        task = spec["Spec"]["TaskTemplate"]
        limits = task["Resources"]["Limits"]
        assert limits["MemoryBytes"] == 1 << 30 and limits["Pids"] == 300
        assert task["ContainerSpec"]["Init"] is True
        labels = spec["Spec"]["Labels"]
        assert labels[OWNER_LABEL] == owner_token() and labels[RUN_LABEL]
        assert labels["org.openenv-v1.env"] == ENV
        assert task["ContainerSpec"]["Labels"][OWNER_LABEL] == owner_token()
        image = ensure_env_image(CODE_ENV).image
        assert task["ContainerSpec"]["Image"] == image
        # Its own overlay network, labelled as its owner's.
        (network,) = swarm_labelled(mine)["network"]
        assert [n["Target"] for n in task["Networks"]] == [
            docker_json("network", "inspect", network)[0]["Id"]
        ]
        assert len(swarm_labelled(mine)["container"]) == 3
    finally:
        pool.close()
    took = wait_until_swarm_gone(mine, timeout_s=30)
    print(f"service, containers and network gone {took:.1f}s after close")


def test_ingress_mode_creates_the_routing_mesh_service_it_is_told(mine, monkeypatch):
    """The routing mesh needs IPVS, which this kernel lacks: connections to its
    port get no answer here. So ingress mode is checked at its boundary: the exact
    `docker service create` arguments, and a real service that Swarm publishes on
    the port asked for, in ingress mode, with the URL of that port."""
    options = SwarmOptions(
        project_path=str(CODE_ENV),
        publish="ingress",
        replicas=3,
        port=31234,
        network="envs",
        cpus=1.5,
    )
    service = SwarmService(
        env=ENV, options=options, launch_timeout_s=60, secret_env={"TOKEN": "v"}
    )
    service._service_name = "code-env-swarm-1"
    monkeypatch.setenv("OPENENV_V1_RUN_ID", "run-7")
    argv, env = service.create_args(
        EnvImage("openenv-v1/code_env:abc", "built from x"), {"MARK": "m"}
    )
    token = owner_token()
    labels = []
    for key, value in {
        "org.openenv-v1.managed": "1",
        OWNER_LABEL: token,
        RUN_LABEL: "run-7",
        "org.openenv-v1.env": ENV,
    }.items():
        labels += ["--label", f"{key}={value}", "--container-label", f"{key}={value}"]
    assert argv == [
        *("service", "create", "--detach", "--quiet", "--init"),
        *("--name", "code-env-swarm-1", "--replicas", "3", "--network", "envs"),
        *("--publish", "published=31234,target=8000"),
        *labels,
        *("--cap-drop", "ALL"),
        *("--limit-pids", "1024", "--limit-memory", "4g", "--limit-cpu", "1.5"),
        *("--user", "65534:65534", "--env", "HOME=/tmp"),  # the image names none
        *("--stop-grace-period", "2s", "--no-resolve-image"),
        *("--env", "MARK", "--env", "TOKEN"),
        "openenv-v1/code_env:abc",
    ]
    assert env == {"MARK": "m", "TOKEN": "v"}  # values by environment, not argv

    # For real: Swarm publishes it through the mesh on a port it picks.
    plan = swarm_launch_plan(swarm_target(publish="ingress", replicas=1))
    assert plan.servers_at_start == 1  # one address: the mesh's
    provider = plan.launcher
    try:
        url = provider.start(**plan.start_args)
        spec = service_spec(mine)
        (port,) = spec["Endpoint"]["Ports"]
        assert port["PublishMode"] == "ingress" and port["TargetPort"] == 8000
        assert url == f"http://127.0.0.1:{port['PublishedPort']}"
        assert spec["Spec"]["EndpointSpec"].get("Mode", "vip") == "vip"
    finally:
        provider.stop()
    wait_until_swarm_gone(mine, timeout_s=30)


def test_a_task_that_exits_fails_the_launch_with_its_state_and_log(mine):
    """A server that dies at start (here: an entrypoint of `python3 -c` with no
    code) fails the launch with Swarm's task state and the task's log."""
    target = EnvTarget(
        env=ENV,
        provider="swarm",
        provider_kwargs={
            "project_path": str(CODE_ENV),
            "publish": "host",
            "replicas": 1,
            "service_args": ["--restart-condition", "none"],
        },
        launch_timeout_s=60,
    )
    target.provider_kwargs["service_args"] += ["--entrypoint", "python3 -c"]

    async def launch() -> None:
        async with contextlib.AsyncExitStack() as stack:
            await open_env(target, stack)

    with pytest.raises(EnvFailure) as info:
        asyncio.run(launch())
    message = str(info.value)
    assert message.startswith(f"cannot launch {ENV} with Swarm: Swarm task ")
    assert "is failed" in message or "is complete" in message
    assert "Argument expected for the -c option" in message
    wait_until_swarm_gone(mine, timeout_s=30)


async def test_a_cancelled_launch_leaves_no_service(mine):
    """Cancelled while its service starts, a launch leaves no service, container or
    network (the stack's stop removes them; the abandoned start gives up)."""

    async def launch() -> None:
        async with contextlib.AsyncExitStack() as stack:
            await open_env(swarm_target(publish="host", replicas=1), stack)
            await asyncio.sleep(600)

    task = asyncio.create_task(launch())
    deadline = asyncio.get_running_loop().time() + 120
    while not swarm_labelled(mine)["service"]:  # cancelled while its task starts
        assert asyncio.get_running_loop().time() < deadline and not task.done()
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    wait_until_swarm_gone(mine, timeout_s=30)


def test_an_inactive_swarm_fails_naming_the_command_that_starts_one(tmp_path):
    # A client with no daemon behind it: `docker info` fails, as on an engine
    # that is no swarm manager the state is not `active`.
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\n")
    fake.chmod(0o755)
    env = {**os.environ, "OPENENV_V1_DOCKER": str(fake)}
    code = textwrap.dedent(
        f"""
        import asyncio, contextlib
        from openenv_v1.core import EnvTarget, open_env
        target = EnvTarget(env="test/code_env", provider="swarm",
                           provider_kwargs={{"project_path": {str(CODE_ENV)!r}}})
        async def main():
            async with contextlib.AsyncExitStack() as stack:
                await open_env(target, stack)
        try:
            asyncio.run(main())
        except Exception as e:
            print(e)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    ).stdout
    assert out.startswith(f"cannot launch {ENV} with Swarm: Docker Swarm is not active")
    assert "run `docker swarm init --advertise-addr" in out


OWNER_SCRIPT = textwrap.dedent(
    """
    import asyncio, contextlib, sys
    from openenv_v1.core import EnvTarget, open_env

    async def main():
        target = EnvTarget(env="test/code_env", provider="swarm", launch_timeout_s=180,
                           provider_kwargs={"project_path": sys.argv[1],
                                            "publish": "host", "replicas": 2})
        async with contextlib.AsyncExitStack() as stack:
            await open_env(target, stack)
            print("READY", flush=True)
            await asyncio.to_thread(sys.stdin.readline)  # the test has looked
            if sys.argv[2] == "error":
                raise RuntimeError("the rollout failed")
            await asyncio.sleep(600)

    asyncio.run(main())
    """
)


@pytest.mark.long  # waits on Swarm for most of its half minute
@pytest.mark.parametrize("end", ["SIGKILL", "error"])
def test_no_service_outlives_its_owner_however_the_owner_ends(real_swarm, end):
    """The owner (an eval, a user simulator, `check`) ends; its service, the
    service's containers and its network are gone within 30 s, SIGKILL included."""
    run_id = f"test-swarm-owner-{end}-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(CODE_ENV), end],
        cwd=ROOT,
        env={**os.environ, "OPENENV_V1_RUN_ID": run_id},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdin is not None and owner.stdout is not None
        assert owner.stdout.readline().strip() == "READY", owner.stderr.read()
        left = swarm_labelled(label)
        assert (len(left["service"]), len(left["network"])) == (1, 1)
        assert len(left["container"]) == 2
        if end == "error":
            owner.stdin.write("go\n")  # it raises now
            owner.stdin.flush()
        else:
            owner.send_signal(getattr(signal, end))
        owner.wait(timeout=60)
        took = wait_until_swarm_gone(label, timeout_s=30)
        print(f"{end}: service, containers, network gone {took:.1f}s after the owner")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        remove_swarm_labelled(label)


def test_a_reaper_sweeps_services_and_networks_whose_owner_is_gone(real_swarm):
    """A reaper that was itself killed leaves its owner's things behind: the next
    one sweeps services and networks (as containers) whose owner process is gone."""
    gone = f"{host_prefix()}/{pid_namespace()}/999999999/1"  # no such pid here
    run_id = f"test-swarm-orphans-{os.getpid()}"
    labels = [f"{MANAGED_LABEL}=1", f"{OWNER_LABEL}={gone}", f"{RUN_LABEL}={run_id}"]
    flags = [arg for label in labels for arg in ("--label", label)]
    label = f"{RUN_LABEL}={run_id}"
    try:
        docker_engine.docker(
            "network",
            "create",
            "--driver",
            "overlay",
            *flags,
            f"orphan-net-{os.getpid()}",
        )
        docker_engine.docker(
            *("service", "create", "--detach", "--quiet", "--replicas", "0"),
            *flags,
            *("--name", f"orphan-{os.getpid()}", "--no-resolve-image"),
            ensure_env_image(CODE_ENV).image,
        )
        # No check that both still stand: under xdist another test's reaper may
        # sweep these orphans first (any reaper sweeps every dead owner's things);
        # either way a reaper removed them, which is what is asserted.
        sweep_orphans(docker_engine.DOCKER)
        assert swarm_labelled(label) == {"service": [], "container": [], "network": []}
    finally:
        remove_swarm_labelled(label)


def test_unknown_swarm_options_fail_naming_them():
    with pytest.raises(EnvFailure) as info:
        swarm_launch_plan(swarm_target(publish="mesh", replica=2))
    message = str(info.value)
    assert message.startswith("bad Swarm option in `provider_kwargs`: publish: ")
    assert "replica: Extra inputs are not permitted" in message
    assert json.dumps("ingress") in message or "'ingress'" in message


async def test_by_default_tasks_publish_nothing_and_reach_nothing(mine):
    """`publish` "local" (the default): the service publishes no port, its tasks run
    on an internal overlay network of their own (no metadata address, no internet)
    without capabilities as uid 65534, and each is reached through a gateway
    container published on 127.0.0.1 only; both go when the launch stops."""
    from tests.test_docker_isolation import METADATA, probe

    internet = socket.getaddrinfo("pypi.org", 443, socket.AF_INET)[0][4][0]
    async with contextlib.AsyncExitStack() as stack:
        client = await open_env(swarm_target(replicas=1), stack)
        inside = await probe(client, METADATA, internet)
        spec = service_spec(mine)
        containers = docker_json("inspect", *swarm_labelled(mine)["container"])
        (network,) = docker_json("network", "inspect", *swarm_labelled(mine)["network"])
    assert inside["metadata"] != "reached" and inside["internet"] != "reached"
    assert inside["uid"] == 65534 and int(inside["cap_eff"], 16) == 0
    # Nothing published by the service; its network is internal.
    assert spec["Spec"]["EndpointSpec"].get("Ports") is None
    assert spec["Spec"]["EndpointSpec"]["Mode"] == "dnsrr"
    task = spec["Spec"]["TaskTemplate"]["ContainerSpec"]
    assert task["CapabilityDrop"] == ["ALL"] and task["User"] == "65534:65534"
    assert network["Internal"] is True
    # The way in: a gateway container on loopback, attached to that network.
    (gateway,) = [c for c in containers if c["Name"].startswith("/openenv-v1-gateway")]
    (published,) = gateway["NetworkSettings"]["Ports"]["8000/tcp"]
    assert published["HostIp"] == "127.0.0.1"
    assert client.base_url == f"http://127.0.0.1:{published['HostPort']}"
    assert network["Name"] in gateway["NetworkSettings"]["Networks"]
    assert gateway["HostConfig"]["CapDrop"] == ["ALL"]
    assert gateway["Config"]["User"] == "65534:65534"
    wait_until_swarm_gone(mine, timeout_s=30)
