"""The real Docker engine for tests: a session fixture and what tests ask Docker.

`real_docker` has an engine answer and the stand-in OpenEnv base image built
(`tests.docker_engine`), and points openenv-v1 at Debian's `docker` client (BuildKit
without buildx), building on the host's network. With no engine to be had the test is skipped, saying why; under
`CI=true` it fails instead, since CI must run these tests. An engine started here is
stopped when the session ends.

    def test_something(real_docker): ...   # the fixtures are a conftest plugin
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_v1.core.launch.docker.build import BUILD_NETWORK_VAR
from openenv_v1.core.launch.docker.cli import DOCKER_VAR
from openenv_v1.core.launch.docker.reaper import RUN_LABEL
from tests import docker_engine, zygote
from tests.servers import TEST_RUN_VAR, eval_environ

CODE_ENV = Path(__file__).resolve().parent / "envs" / "docker" / "code_env"


@pytest.fixture(scope="session")
def _engine() -> Iterator[None]:
    in_ci = os.environ.get("CI", "").lower() == "true"
    try:
        engine = docker_engine.ensure_engine(install=in_ci)
    except docker_engine.EngineUnavailable as e:
        if in_ci:
            pytest.fail(f"CI runs the Docker tests, but there is no engine: {e}")
        pytest.skip(f"no Docker engine: {e}")
    if engine.started_here:
        # Stopped once the test run is gone, not when this worker's session ends:
        # the run's other workers may still be using it.
        docker_engine.stop_when_gone(int(os.environ.get(TEST_RUN_VAR, os.getpid())))
    docker_engine.ensure_base_image(log=lambda _: None)
    yield


@pytest.fixture
def real_docker(_engine, monkeypatch) -> str:
    """Debian's docker client, also what openenv-v1 runs for this test; env images
    build on the host's network (`OPENENV_V1_BUILD_NETWORK=host`), where package
    registries answer on machines like these (a test of Docker's default build
    network unsets it)."""
    monkeypatch.setenv(DOCKER_VAR, docker_engine.DOCKER)
    monkeypatch.setenv(BUILD_NETWORK_VAR, "host")
    return docker_engine.DOCKER


def docker_json(*args: str) -> list[dict]:
    """`docker <args> --format '{{json .}}'` (e.g. `inspect ID`), parsed."""
    result = docker_engine.docker(*args, "--format", "{{json .}}", check=False)
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def labelled(label: str) -> list[str]:
    """Ids of containers, running or not, that carry `label` (`key=value`), short as
    `docker ps -aq` prints them."""
    return _listed("container", label)


def wait_until_gone(label: str, timeout_s: float = 30.0) -> float:
    """Seconds until no container carries `label`; fails after `timeout_s`."""
    started = time.monotonic()
    while labelled(label):
        if time.monotonic() - started > timeout_s:
            raise AssertionError(
                f"containers labelled {label} still exist after {timeout_s:.0f}s"
            )
        time.sleep(0.2)
    return time.monotonic() - started


def remove_labelled(label: str) -> None:
    """Clean up after a failed test."""
    ids = labelled(label)
    if ids:
        subprocess.run(
            [docker_engine.DOCKER, "rm", "-f", *ids], capture_output=True, check=False
        )


@pytest.fixture
def real_swarm(real_docker) -> str:
    """The real engine as a swarm manager. A developer's engine that is no swarm is
    left alone (the test is skipped, saying how to start one); under `CI=true` a
    one-node swarm is initialised, since CI must run these tests."""
    state = docker_engine.docker(
        "info", "--format", "{{.Swarm.LocalNodeState}} {{.Swarm.ControlAvailable}}"
    ).stdout.split()
    if state != ["active", "true"]:
        if os.environ.get("CI", "").lower() != "true":
            pytest.skip(
                f"Docker Swarm is not active here ({' '.join(state)}): run `docker "
                "swarm init --advertise-addr 127.0.0.1` for a one-node swarm"
            )
        # xdist workers may race here: the one that loses finds a swarm already.
        init = docker_engine.docker(
            "swarm", "init", "--advertise-addr", "127.0.0.1", check=False
        )
        if init.returncode != 0 and "already part of a swarm" not in init.stderr:
            raise RuntimeError(f"docker swarm init failed: {init.stderr.strip()}")
    return real_docker


def swarm_labelled(label: str) -> dict[str, list[str]]:
    """Services, containers and networks carrying `label`, by kind (empty lists
    when none is left)."""
    return {kind: _listed(kind, label) for kind in ("service", "container", "network")}


_LISTS = {
    "container": ("/containers/json?all=1&", "Id", ("ps", "-aq")),
    "service": ("/services?", "ID", ("service", "ls", "-q")),
    "network": ("/networks?", "Id", ("network", "ls", "-q")),
}
"""What lists each kind: the Engine API's path and id field, the CLI's command."""


def _listed(kind: str, label: str) -> list[str]:
    """Short ids of the `kind` objects carrying `label`. Tests poll these every few
    hundred milliseconds while an eval runs, so they are asked of the Engine API on
    its local socket (~1 ms of CPU), not of the `docker` CLI (~20 ms a call, ~1,000
    calls a suite); through the CLI when the engine is elsewhere (`DOCKER_HOST`,
    `DOCKER_CONTEXT`)."""
    path, id_field, ls = _LISTS[kind]
    sock = _local_engine_socket()
    if sock is None:
        result = docker_engine.docker(*ls, "--filter", f"label={label}", check=False)
        return result.stdout.split()
    query = urllib.parse.urlencode({"filters": json.dumps({"label": [label]})})
    conn = _UnixHTTPConnection(sock)
    try:
        conn.request("GET", path + query)
        response = conn.getresponse()
        body = response.read()
    finally:
        conn.close()
    if response.status != 200:
        raise AssertionError(f"docker engine: GET {path}: {response.status} {body!r}")
    return [item[id_field][:12] for item in json.loads(body)]


def _local_engine_socket() -> str | None:
    if os.environ.get("DOCKER_CONTEXT"):
        return None
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host.removeprefix("unix://") if host.startswith("unix://") else None


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=30)
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def wait_until_swarm_gone(label: str, timeout_s: float = 30.0) -> float:
    """Seconds until no service, container or network carries `label`; fails after
    `timeout_s`, naming what is left."""
    started = time.monotonic()
    while any((left := swarm_labelled(label)).values()):
        if time.monotonic() - started > timeout_s:
            raise AssertionError(
                f"still there {timeout_s:.0f}s later, labelled {label}: {left}"
            )
        time.sleep(0.3)
    return time.monotonic() - started


def remove_swarm_labelled(label: str) -> None:
    """Clean up after a failed test."""
    left = swarm_labelled(label)
    for kind, rm in (("service", ("service", "rm")), ("container", ("rm", "-f"))):
        if left[kind]:
            docker_engine.docker(*rm, *left[kind], check=False)
    if left["network"]:
        with contextlib.suppress(AssertionError):
            wait_until_swarm_gone(label, timeout_s=20)
        docker_engine.docker("network", "rm", *left["network"], check=False)


@contextlib.contextmanager
def labelled_eval(
    command: list[str], cwd: Path, run_id: str
) -> Iterator[tuple[zygote.Started | subprocess.Popen[str], str]]:
    """An eval (`command`), forked from the worker's eval zygote and not waited for
    (`zygote.start`), whose containers, services and networks carry its run
    label: yields the process and that label (`org.openenv-v1.run=<run_id>`). Its
    output goes to `eval_log(cwd, run_id)` (`ends_within` quotes it). On exit it is
    killed (its simulators die with it) and whatever still carries the label is
    removed (a failed test's leftovers)."""
    label = f"{RUN_LABEL}={run_id}"
    with eval_log(cwd, run_id).open("wb") as log:
        proc = zygote.start(
            command,
            cwd=cwd,
            env=eval_environ({"OPENENV_V1_RUN_ID": run_id}),
            output=log,
        )
    try:
        yield proc, label
    finally:
        proc.kill()
        proc.wait(30)
        remove_swarm_labelled(label)


def eval_log(cwd: Path, run_id: str) -> Path:
    """Where `labelled_eval` writes the output of the eval of `run_id`."""
    return cwd / f"eval-{run_id}.log"


def ends_within(
    proc: zygote.Started | subprocess.Popen[str], log: Path, timeout_s: float
) -> None:
    """Wait for `proc` to end; past `timeout_s`, fail with what it and its
    descendants were doing (state and kernel wait channel of each) and the tail of
    its output (`log`)."""
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        tree = "\n".join(_describe(pid) for pid in _descendants(proc.pid))
        tail = log.read_text(errors="replace")[-4000:]
        raise AssertionError(
            f"pid {proc.pid} still running {timeout_s:.0f}s later:\n{tree}\n"
            f"its output ends with:\n{tail}"
        ) from None


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _describe(pid: int) -> str:
    proc = Path(f"/proc/{pid}")
    try:
        cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        threads = []
        for task in sorted((proc / "task").iterdir()):
            with contextlib.suppress(OSError):
                state = (task / "stat").read_text().rpartition(")")[2].split()[0]
                comm = (task / "comm").read_text().strip()
                threads.append(f"{comm}:{state}:{(task / 'wchan').read_text()}")
    except OSError:
        return f"{pid} (gone)"
    return f"{pid} {cmdline[:200]}\n    threads: {', '.join(threads)}"


def wait_for_containers(
    label: str,
    owner: zygote.Started | subprocess.Popen[str],
    count: int = 1,
    timeout_s: float = 300,
) -> list[str]:
    """The containers carrying `label`, once there are `count` (`owner` must live)."""
    deadline = time.monotonic() + timeout_s
    while len(found := labelled(label)) < count:
        assert owner.poll() is None, "the eval ended early"
        assert time.monotonic() < deadline, f"{count} container(s) never started"
        time.sleep(0.5)
    return found
