"""Docker launches with a real engine: images built from env folders, containers on
the isolated network with limits and labels, shared through the pool, and never left
behind (what a container reaches from inside: `test_docker_isolation.py`).

The env is `tests/envs/docker/code_env`, built from its own `server/Dockerfile` on the
stand-in OpenEnv base: it runs the Python code a step sends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_env, open_episode
from openenv_v1.core.launch.docker.image import ensure_env_image
from openenv_v1.core.launch.docker.reaper import OWNER_LABEL, RUN_LABEL, owner_token
from openenv_v1.core.launch.pool import ServerPool
from tests import docker_engine
from tests.real_docker import (
    CODE_ENV,
    docker_json,
    labelled,
    remove_labelled,
    wait_until_gone,
)

ROOT = Path(__file__).resolve().parent.parent
ENV = "test/code_env"


def code_target(
    project_path: Path = CODE_ENV, secret_env: dict | None = None, **kwargs
) -> EnvTarget:
    return EnvTarget(
        env=ENV,
        use_docker=True,
        provider_kwargs={"project_path": str(project_path), **kwargs},
        secret_env=secret_env or {},
        launch_timeout_s=180,
    )


@pytest.fixture
def mine(real_docker):
    """The owner label of this test process's containers; any left are removed."""
    label = f"{OWNER_LABEL}={owner_token()}"
    yield label
    remove_labelled(label)


async def test_an_env_folder_runs_built_from_its_dockerfile_on_loopback_with_limits(
    mine,
):
    first = await asyncio.to_thread(ensure_env_image, CODE_ENV)
    target = code_target(env_vars={"MARK": "from env_vars"}, pids_limit=300)
    secret = {"SECRET_TOKEN": "s3cret-value"}
    target = EnvTarget(**{**target.__dict__, "secret_env": secret})
    async with contextlib.AsyncExitStack() as stack:
        client = await open_env(target, stack)
        (container,) = labelled(mine)
        (info,) = docker_json("inspect", container)
        await client.reset()
        code = "import os; print(os.environ['MARK'], os.environ['SECRET_TOKEN'])"
        result = await client.step({"code": code})
        assert result.observation["stdout"] == "from env_vars s3cret-value\n"
        assert result.reward == 1.0 and result.done

    # The image was the folder's, reused for the launch.
    assert info["Config"]["Image"] == first.image
    assert (await asyncio.to_thread(ensure_env_image, CODE_ENV)).reused
    # Nothing published: reached at its address on the internal network.
    assert info["HostConfig"]["PortBindings"] == {}
    address = info["NetworkSettings"]["Networks"]["openenv-v1-isolated"]["IPAddress"]
    assert client.base_url == f"http://{address}:8000"
    # Limits: defaults, and one overridden.
    host = info["HostConfig"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["CapDrop"] == ["ALL"]
    assert host["PidsLimit"] == 300
    assert host["Memory"] == host["MemorySwap"] == 4 * 1024**3
    # Labels name this package, the owner and the run; values never ride on argv.
    labels = info["Config"]["Labels"]
    assert labels["org.openenv-v1.managed"] == "1"
    assert labels[OWNER_LABEL] == owner_token()
    assert labels[RUN_LABEL] and labels["org.openenv-v1.env"] == ENV
    assert "s3cret-value" not in " ".join(info["Args"] + [info["Path"]])
    # Gone once the stack closed.
    assert labelled(mine) == []


async def test_an_edited_folder_is_rebuilt_and_a_failed_build_names_its_step(
    mine, tmp_path
):
    folder = tmp_path / "code_env"
    shutil.copytree(CODE_ENV, folder)
    dockerfile = folder / "server" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace(
            "COPY . /app/env",
            "RUN echo checking the env && exit 7\nCOPY . /app/env",
        )
    )
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_env(code_target(folder), stack)
    message = str(info.value)
    assert f"cannot launch {ENV} with Docker: building openenv-v1/code_env:" in message
    assert "at step `[stage-0 3/5] RUN echo checking the env && exit 7`" in message
    assert "exit code: 7" in message
    assert "checking the env" in message.split("its output ends with:")[1]
    assert labelled(mine) == []


OWNER_SCRIPT = textwrap.dedent(
    """
    import asyncio, contextlib, os, sys
    from openenv_v1.core import EnvTarget, open_env

    async def main():
        target = EnvTarget(env="test/code_env", use_docker=True, launch_timeout_s=180,
                           provider_kwargs={"project_path": sys.argv[1]})
        async with contextlib.AsyncExitStack() as stack:
            await open_env(target, stack)
            print("READY", flush=True)
            if sys.argv[2] == "error":
                raise RuntimeError("the rollout failed")
            await asyncio.sleep(600)

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("end", ["SIGKILL", "SIGTERM", "error"])
def test_no_container_outlives_its_owner_however_the_owner_ends(
    real_docker, end, tmp_path
):
    """The owner is a process of its own (an eval, a user simulator, `check`); its
    container must be gone within 30 s of its end, SIGKILL included."""
    run_id = f"test-owner-{end}-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(CODE_ENV), end],
        cwd=ROOT,
        env={**os.environ, "OPENENV_V1_RUN_ID": run_id},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        assert owner.stdout.readline().strip() == "READY", owner.stderr.read()
        assert len(labelled(label)) == 1
        if end != "error":
            owner.send_signal(getattr(signal, end))
        owner.wait(timeout=60)
        took = wait_until_gone(label, timeout_s=30)
        print(f"{end}: container gone {took:.1f}s after the owner ended")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        remove_labelled(label)


async def test_a_cancelled_launch_leaves_no_container(mine):
    async def launch() -> None:
        async with contextlib.AsyncExitStack() as stack:
            await open_env(code_target(), stack)
            await asyncio.sleep(600)

    task = asyncio.create_task(launch())
    deadline = time.monotonic() + 120
    while not labelled(mine):  # cancelled while the container starts
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.05)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    wait_until_gone(mine, timeout_s=30)


def test_shared_containers_serve_many_sessions_and_full_ones_add_a_container(mine):
    """Through the same pool as UV servers: with one session per container, two at
    once need two containers; with room, a session reuses a running one."""
    target = code_target(env_vars={"MAX_SESSIONS": "1"})
    pool = ServerPool(target, max_servers=2)
    try:
        pool_url = pool.serve_http()
        leased = EnvTarget(env=ENV, pool_url=pool_url)

        async def one_session(
            code: str, barrier: asyncio.Barrier | None = None
        ) -> dict:
            async with contextlib.AsyncExitStack() as stack:
                client = await open_env(leased, stack)
                await client.reset()
                observation = (await client.step({"code": code})).observation
                if barrier is not None:  # both sessions are open at once
                    await barrier.wait()
                return observation

        async def two_at_once() -> list[dict]:
            barrier = asyncio.Barrier(2)
            return await asyncio.gather(
                one_session("print('a')", barrier), one_session("print('b')", barrier)
            )

        first, second = asyncio.run(two_at_once())
        assert (first["stdout"], second["stdout"]) == ("a\n", "b\n")
        assert len(pool.servers()) == 2 == len(labelled(mine))
        again = asyncio.run(one_session("print('c')"))
        assert again["stdout"] == "c\n" and len(labelled(mine)) == 2
    finally:
        pool.close()
    assert labelled(mine) == []


FORK_BOMB = "import os\nwhile True:\n    os.fork()"
MEMORY_HOG = "hog = b'x' * (3 << 30)\nprint(len(hog))"


@pytest.mark.long
def test_limits_end_a_fork_bomb_and_a_memory_hog_and_spare_the_rest(mine):
    """Model-written code under the container limits: a fork bomb meets the pids
    limit, a memory hog the memory limit (the kernel kills it); each ends its
    episode with an error that says so, while a rollout beside them in another
    container, the containers' servers, and this host carry on."""
    target = code_target(
        memory="512m",
        pids_limit=128,
        env_vars={"MAX_SESSIONS": "1", "CODE_TIMEOUT_S": "8"},
    )
    pool = ServerPool(target, max_servers=3)
    try:
        leased = EnvTarget(env=ENV, pool_url=pool.serve_http(), message_timeout_s=120)

        async def run(code: str, barrier: asyncio.Barrier) -> dict:
            async with contextlib.AsyncExitStack() as stack:
                client = await open_env(leased, stack)
                await barrier.wait()  # the sessions are open at once
                await client.reset()
                return (await client.step({"code": code})).observation

        async def together(*codes: str) -> list[dict]:
            barrier = asyncio.Barrier(len(codes))
            runs = asyncio.gather(*(run(code, barrier) for code in codes))
            return await asyncio.wait_for(runs, 300)

        bomb, hog, fine = asyncio.run(together(FORK_BOMB, MEMORY_HOG, "print('fine')"))
        assert len(labelled(mine)) == 3  # one session per container
        assert bomb["exit_code"] != 0
        assert (
            "ran longer than 8s and was killed" in bomb["message"]
            or "could not fork (pids limit)" in bomb["message"]
        ), bomb
        assert hog["message"].startswith("the code was killed by SIGKILL"), hog
        assert (fine["message"], fine["stdout"]) == ("the code exited with 0", "fine\n")
        # Every container still serves: three more sessions at once, one on each.
        again = asyncio.run(together(*(f"print({i})" for i in range(3))))
        assert [o["stdout"] for o in again] == ["0\n", "1\n", "2\n"]
        assert len(labelled(mine)) == 3
        # The host is fine: it still forks.
        assert subprocess.run(["true"], check=False).returncode == 0
    finally:
        pool.close()
    assert labelled(mine) == []


async def test_a_server_that_exits_before_ready_fails_at_once_with_its_log(
    mine, tmp_path
):
    """Any local image runs with `image`; one whose server dies on start fails the
    launch as soon as Docker says it exited, with its exit code and log tail."""
    folder = tmp_path / "crashing_env"
    folder.mkdir()
    (folder / "Dockerfile").write_text(
        "FROM ghcr.io/meta-pytorch/openenv-base:latest\n"
        'CMD ["python3", "-c", "import sys; print(\'no such app\'); sys.exit(3)"]\n'
    )
    built = await asyncio.to_thread(ensure_env_image, folder)
    target = EnvTarget(
        env="test/crashing", use_docker=True, provider_kwargs={"image": built.image}
    )
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_env(target, stack)
    message = str(info.value)
    assert f"({built.image}) exited with code 3 before it was ready" in message
    # As uid 65534 first (`user` "auto"), then as root, unless an earlier launch of
    # this image in the process already found it needs root: the log tail ends the
    # message either way.
    assert message.endswith(
        (
            "its log ends with:\nno such app",
            "no such app (run as root after it exited as uid 65534)",
        )
    ), message
    assert time.monotonic() - started < 60
    assert labelled(mine) == []


async def test_a_container_killed_mid_episode_is_launched_again_and_the_episode_resumed(
    mine,
):
    """A launch of the episode's own whose container is killed after the reset: the
    episode launches another, replays the reset there (it answers the same), sends
    the action, and ends as an undisturbed episode does; no container is left."""
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(code_target(), EpisodeLimits(), stack)
        await episode.reset({"seed": 1})
        [first] = labelled(mine)
        docker_engine.docker("kill", first)
        await episode.act('{"code": "print(6 * 7)"}')
        report = episode.report
        assert (report.error, report.done, report.reward) == (None, True, 1.0)
        [resume] = report.resumes
        assert resume["replayed_steps"] == 0 and resume["server"] == episode.base_url
        # Another container (the address may be the same: the network reuses it).
        assert labelled(mine) not in ([], [first])
    wait_until_gone(mine)
