"""The Docker path at its edges, with no Docker engine: a fake `docker` CLI.

`tests/fake_docker/docker` answers the calls `DockerLaunch` makes (`run`, `port`,
`inspect`, `logs`, `stop`, `rm`, and the reaper's `ps`) and serves the local Wordle env
as the "container" on the published host port, so a launch through
`open_env(use_docker=True)` is real from the `docker run` argv down to the WebSocket.
It covers what a real engine cannot produce on demand (a missing daemon, a registry
image that cannot be pulled, a busy host port); `test_docker_launch.py` runs the real
engine. The `eval` run at the end stops at `--dry-run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import time
import tomllib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from openenv import GenericEnvClient

from openenv_v1.core import (
    EnvFailure,
    EnvTarget,
    EpisodeLimits,
    open_env,
    open_episode,
)
from openenv_v1.core.launch.docker import network as docker_network
from openenv_v1.core.launch.docker.reaper import owner_labels
from openenv_wordle_v1 import WORDLE_APP as SPACE_APP
from tests import zygote
from tests.servers import BIN, WORDLE_APP, free_port, processes_matching

FAKE_DOCKER = Path(__file__).resolve().parent / "fake_docker"
SPACE = "openenv/wordle"
TAG = "sha-0123abc"
IMAGE = f"registry.hf.space/openenv-wordle:{TAG}"
# A Space id with capitals and `_` on the default tag: the registry name is its
# lowercased `owner-name` form.
ODD_SPACE = "OpenEnv/Wordle_Env"
ODD_IMAGE = "registry.hf.space/openenv-wordle-env:latest"


def alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if item)


@dataclass
class FakeDocker:
    log: Path
    state: Path

    def calls(self) -> list[list[str]]:
        """The launch's own calls (not its readiness checks or a reaper's sweeps)."""
        if not self.log.exists():
            return []
        every = [json.loads(line) for line in self.log.read_text().splitlines()]
        sweeps = (["service", "ls"], ["network", "ls"])  # the reaper's, for Swarm
        # Asking about the image's user and the network is not the launch's doing.
        asks = ("ps", "inspect", "logs", "image")
        return [
            c
            for c in every
            if c[0] not in asks
            and c[:2] not in sweeps
            and c[:2] != ["network", "inspect"]
        ]

    def containers(self) -> list[dict]:
        if not self.state.exists():
            return []
        return [json.loads(p.read_text()) for p in sorted(self.state.glob("*.json"))]

    def server_log(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.state.glob("*.log")))

    def kill_leftovers(self) -> None:
        """Stop servers the fake started and nothing removed (a failed test)."""
        for c in self.containers():
            pid = c["pid"]
            if pid and alive(pid) and f"--port {c['port']}" in cmdline_of(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)


def cmdline_of(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


@pytest.fixture
def fake_docker(tmp_path, monkeypatch) -> Iterator[FakeDocker]:
    fake = FakeDocker(log=tmp_path / "docker-calls.jsonl", state=tmp_path / "docker")
    monkeypatch.setenv("PATH", f"{FAKE_DOCKER}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(fake.log))
    monkeypatch.setenv("FAKE_DOCKER_STATE", str(fake.state))
    monkeypatch.setenv("FAKE_DOCKER_PYTHON", sys.executable)
    monkeypatch.setenv(
        "FAKE_DOCKER_IMAGES", json.dumps({IMAGE: WORDLE_APP, ODD_IMAGE: WORDLE_APP})
    )
    monkeypatch.delenv("FAKE_DOCKER_DAEMON", raising=False)
    # `docker` on PATH is the fake only when no client is named (a developer's
    # OPENENV_V1_DOCKER would send these launches to a real engine).
    monkeypatch.delenv("OPENENV_V1_DOCKER", raising=False)
    monkeypatch.delenv("FAKE_DOCKER_PULL_S", raising=False)
    assert shutil.which("docker") == str(FAKE_DOCKER / "docker"), "not executable?"
    try:
        yield fake
    finally:
        fake.kill_leftovers()


def docker_target(env: str = SPACE, **provider_kwargs) -> EnvTarget:
    """A Docker launch with `egress`: the fake serves on this host's loopback, as
    a container's published port; the internal network's path (no port published)
    is `test_docker_isolation.py`'s, on the real engine."""
    provider_kwargs.setdefault("egress", True)
    return EnvTarget(env=env, use_docker=True, provider_kwargs=provider_kwargs)


def run_argv(name: str, port: int | str, env_names: list[str], image: str) -> list[str]:
    """What `DockerLaunch` runs with `egress`: its network, loopback publishing, the
    owner's labels, no capabilities, the default limits, uid 65534 (the image names
    no user), env vars by name only (values reach `docker` through its
    environment)."""
    argv = ["run", "-d", "--init", "--name", name, "--network", "openenv-v1-egress"]
    argv += ["-p", f"127.0.0.1:{port}:8000"]
    labels = owner_labels("docker", SPACE)
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    argv += ["--pids-limit", "1024", "--memory", "4g", "--memory-swap", "4g"]
    argv += ["--user", "65534:65534", "-e", "HOME=/tmp"]
    for key in env_names:
        argv += ["-e", key]
    return [*argv, image]


async def test_docker_launch_serves_wordle_and_stops_and_removes_the_container(
    fake_docker,
):
    env_vars = {"WORDLE_MAX_SESSIONS": "1", "OPENENV_V1_MARK": "a b=c"}
    # `app` is what openenv-wordle-v1 always sets; the Docker provider has no use for
    # it (the image's own command runs), so it must not reach `docker run`.
    target = docker_target(tag=TAG, env_vars=env_vars, app=SPACE_APP)
    async with contextlib.AsyncExitStack() as stack:
        client = await open_env(target, stack)
        (container,) = fake_docker.containers()
        port, pid = container["port"], container["pid"]
        assert client.base_url == f"http://127.0.0.1:{port}"
        # The env vars are the server's environment (a container inherits nothing).
        server_env = environ_of(pid)
        assert {k: server_env.get(k) for k in env_vars} == env_vars
        assert "FAKE_DOCKER_LOG" not in server_env

        result = await client.reset(word="crane")
        assert result.done is False
        assert "Enter your first guess" in result.observation["prompt"]
        result = await client.step({"message": "[crane]"})
        assert result.done is True and result.reward == 1.0
        assert "Congratulations" in result.observation["prompt"]
        assert result.observation["info"]["correct"] == 1.0

        # The env honours the env var: one session, and ours holds it.
        async with GenericEnvClient(base_url=client.base_url) as second:
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                await second.reset()

    calls = fake_docker.calls()
    name = calls[0][4]
    assert re.fullmatch(r"openenv-wordle-\d+-[0-9a-f]{6}", name)
    assert calls == [
        run_argv(name, "", list(env_vars), IMAGE),
        ["port", container["id"], "8000/tcp"],
        ["stop", "-t", "2", container["id"]],
        ["rm", "-f", container["id"]],
    ]
    assert fake_docker.containers() == []
    assert not alive(pid), cmdline_of(pid)
    assert processes_matching(WORDLE_APP, f"--port {port}") == []


async def test_docker_publishes_on_loopback_where_openenvs_own_from_env_does_not(
    fake_docker,
):
    """OpenEnv's `from_env(..., use_docker=True)` publishes on every interface, with no
    labels or limits; ours runs the same image on the same port on 127.0.0.1 only."""
    port = free_port()
    env_vars = {"WORDLE_MAX_SESSIONS": "2"}
    client = await GenericEnvClient.from_env(
        SPACE, use_docker=True, tag=TAG, port=port, env_vars=env_vars
    )
    try:
        assert (await client.reset(word="crane")).done is False
    finally:
        await client.close()
    theirs = fake_docker.calls()
    fake_docker.log.unlink()
    async with contextlib.AsyncExitStack() as stack:
        ours_client = await open_env(
            docker_target(tag=TAG, port=port, env_vars=env_vars), stack
        )
        assert (await ours_client.reset(word="crane")).done is False
    ours = fake_docker.calls()

    assert theirs[1][:6] == ["run", "-d", "--name", theirs[1][3], "-p", f"{port}:8000"]
    assert ours[0] == run_argv(ours[0][4], port, list(env_vars), IMAGE)
    # Both stop and remove their container.
    assert [call[0] for call in theirs[2:]] == ["stop", "rm"]
    assert [call[0] for call in ours[1:]] == ["port", "stop", "rm"]
    assert fake_docker.containers() == []


async def test_a_failing_rollout_stops_the_container_it_ran_on_the_given_port(
    fake_docker,
):
    port = free_port()
    secret = {"OPENENV_V1_TEST_TOKEN": "hf_not_really_secret"}
    target = EnvTarget(
        env=ODD_SPACE,
        use_docker=True,
        provider_kwargs={"port": port, "egress": True},
        secret_env=secret,
    )
    with pytest.raises(RuntimeError, match="the rollout failed"):
        async with contextlib.AsyncExitStack() as stack:
            # The whole episode opening, as the user simulator does it: the action
            # schema comes from the container's published port.
            episode = await open_episode(target, EpisodeLimits(), stack)
            assert episode.client.base_url == f"http://127.0.0.1:{port}"
            (container,) = fake_docker.containers()
            # Forwarded variables (`task.user.forward_env`) reach the container.
            server_env = environ_of(container["pid"])
            assert {k: server_env.get(k) for k in secret} == secret
            assert "Enter your first guess" in (await episode.reset({})).text
            raise RuntimeError("the rollout failed")

    calls = fake_docker.calls()
    assert calls[0][:9] == ["run", "-d", "--init", "--name", calls[0][4]] + [
        "--network",
        "openenv-v1-egress",
        "-p",
        f"127.0.0.1:{port}:8000",
    ]
    assert calls[0][-3:] == ["-e", "OPENENV_V1_TEST_TOKEN", ODD_IMAGE]
    assert calls[1:] == [
        ["port", container["id"], "8000/tcp"],
        ["stop", "-t", "2", container["id"]],
        ["rm", "-f", container["id"]],
    ]
    assert fake_docker.containers() == []
    assert not alive(container["pid"])


async def test_an_image_that_cannot_be_pulled_fails_at_once_naming_it(fake_docker):
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_env(docker_target(tag="no-such-tag"), stack)
    message = str(info.value)
    assert f"cannot launch {SPACE} with Docker" in message
    assert "registry.hf.space/openenv-wordle:no-such-tag" in message
    assert "manifest unknown" in message
    assert time.monotonic() - started < 10
    # Nothing ran, so nothing is stopped; a container Docker may have created under
    # the run's name is removed.
    calls = fake_docker.calls()
    assert calls[1:] == [["rm", "-f", calls[0][4]]]
    assert fake_docker.containers() == []


async def test_no_docker_daemon_fails_naming_docker(fake_docker, monkeypatch):
    monkeypatch.setenv("FAKE_DOCKER_DAEMON", "down")
    # The isolated network is looked up once per process: forget that an earlier
    # test of this worker found it, so the first call is always the same.
    monkeypatch.setattr(docker_network, "_ensured", set())
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure, match="Cannot connect to the Docker daemon"):
            await open_env(docker_target(tag=TAG), stack)
    # The first call (the network's) fails: nothing is run, so nothing is left.
    assert [call[0] for call in fake_docker.calls()] == ["network"]


async def test_a_busy_host_port_fails_naming_the_port(fake_docker):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure) as info:
                await open_env(docker_target(tag=TAG, port=port), stack)
    assert f"127.0.0.1:{port} failed: port is already allocated" in str(info.value)
    # Docker kept the container it created but could not start. There is no id for
    # it, so it is removed by the name the run gave it.
    calls = fake_docker.calls()
    assert calls[1:] == [["rm", "-f", calls[0][4]]]
    assert fake_docker.containers() == []


async def test_a_failed_docker_run_keeps_forwarded_secrets_off_the_error(fake_docker):
    value = "hf_this_must_not_reach_the_trace"
    target = EnvTarget(
        env=SPACE,
        use_docker=True,
        provider_kwargs={"tag": "no-such-tag", "egress": True},
        secret_env={"HF_TOKEN": value},
    )
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_env(target, stack)
    assert "no-such-tag" in str(info.value)
    assert value not in "".join(traceback.format_exception(info.value))


async def test_a_docker_launch_leaves_the_event_loop_running(fake_docker, monkeypatch):
    monkeypatch.setenv("FAKE_DOCKER_PULL_S", "1.5")
    gaps: list[float] = []
    ticked = asyncio.Event()

    async def tick() -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(0.05)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            ticked.set()

    ticker = asyncio.create_task(tick())
    await ticked.wait()  # the ticker is running
    try:
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure, match="manifest unknown"):
                await open_env(docker_target(tag="no-such-tag"), stack)
        ticked.clear()
        await ticked.wait()  # the tick after the launch measured its gap, if any
    finally:
        ticker.cancel()
    assert max(gaps) < 1.0


def test_use_docker_flags_resolve_to_a_prime_vm_user_with_the_docker_settings(
    tmp_path,
):
    """`eval --dry-run` resolves and validates the config as typed, writes it, and
    runs nothing (the model-level rules are in test_config.py)."""
    provider_kwargs = {"tag": TAG, "env_vars": {"WORDLE_MAX_SESSIONS": "4"}}
    args = [
        "openenv-wordle-v1",
        "--taskset.use-docker",
        "true",
        "--taskset.task.user.colocated",
        "true",
        "--taskset.task.user.runtime.type",
        "prime",
        "--taskset.task.user.runtime.image",
        "my/docker-vm:1",
        "--taskset.task.user.runtime.region",
        "us",
        "--taskset.task.user.provider-kwargs",
        json.dumps(provider_kwargs),
    ]
    proc = zygote.run(
        [str(BIN / "eval"), *args, "-m", "local-policy", "--dry-run", "--no-push"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (written,) = tmp_path.glob("outputs/*/*/config.toml")
    taskset = tomllib.loads(written.read_text())["taskset"]
    assert (taskset["env"], taskset["use_docker"]) == (SPACE, True)
    user = taskset["task"]["user"]
    assert user["colocated"] is False
    runtime = user["runtime"]
    assert (runtime["type"], runtime["vm"]) == ("prime", True)
    assert (runtime["image"], runtime["region"]) == ("my/docker-vm:1", "us")
    # What the user on the VM passes to `from_env`: ours, plus the Space's app (which
    # the Docker provider ignores, as the first test shows).
    assert user["provider_kwargs"] == {**provider_kwargs, "app": SPACE_APP}


def test_docker_on_host_keeps_the_user_here_and_shares_containers():
    from openenv_v1.vf02.config import OpenEnvConfig

    config = OpenEnvConfig(env="org/env", use_docker=True, docker_on_host=True)
    assert config.task.user.runtime.type == "subprocess"
    assert config.task.user.colocated is False
    assert config.shares_servers()
    native = OpenEnvConfig(
        env="org/env", use_docker=True, docker_on_host=True, tool_calls="native"
    )
    assert native.shares_servers()
    # The default placement is unchanged: a Prime VM, nothing shared.
    default = OpenEnvConfig(env="org/env", use_docker=True)
    assert default.task.user.runtime.type == "prime" and not default.shares_servers()


def test_docker_on_host_without_use_docker_or_with_a_remote_user_names_the_fix():
    from openenv_v1.vf02.config import OpenEnvConfig

    with pytest.raises(ValueError, match="add --taskset.use-docker true"):
        OpenEnvConfig(env="org/env", docker_on_host=True)
    with pytest.raises(ValueError, match="drop --taskset.docker-on-host"):
        OpenEnvConfig(
            env="org/env",
            use_docker=True,
            docker_on_host=True,
            task={"user": {"runtime": {"type": "prime"}}},
        )
