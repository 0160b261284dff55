"""The reaper's owner check and the build lock, on the real engine where it matters.

An owner token names a process of one PID namespace: a pid read in another namespace
is another process, so the reaper must never take such an owner for dead (a
container's, a sandbox's, an `unshare -p` process's containers would be removed
under it). Build locks are the user's own files, never followed through a symlink,
and waited for no longer than a deadline. A build runs on Docker's default build
network unless asked otherwise, and one that fails on the network says which setting
builds on the host's."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from openenv_v1.core import EnvFailure
from openenv_v1.core.launch.docker.build import (
    build_failure,
    build_lock,
    build_lock_dir,
)
from openenv_v1.core.launch.docker.image import ensure_env_image
from openenv_v1.core.launch.docker.reaper import (
    MANAGED_LABEL,
    OWNER_LABEL,
    RUN_LABEL,
    host_prefix,
    owner_alive,
    pid_namespace,
    sweep_orphans,
)
from tests import docker_engine
from tests.test_docker_build import remove_images

BASE = "ghcr.io/meta-pytorch/openenv-base:latest"
ROOT = Path(__file__).resolve().parent.parent


def token_from_another_pid_namespace() -> str:
    """The owner token a process in a PID namespace of its own makes (it is pid 1
    there, while pid 1 here is this host's init)."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) to start a process in a new PID namespace")
    result = subprocess.run(
        [
            *("unshare", "--user", "--map-root-user", "--pid", "--fork"),
            "--mount-proc",
            sys.executable,
            "-c",
            "from openenv_v1.core.launch.docker.reaper import owner_token; print(owner_token())",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot start a process in a new PID namespace: {result.stderr}")
    return result.stdout.strip()


def test_an_owner_in_another_pid_namespace_counts_as_alive():
    foreign = token_from_another_pid_namespace()
    assert f"/{pid_namespace()}/" not in foreign and "/1/" in foreign
    assert owner_alive(foreign)  # pid 1 here is init, started at another time
    # In this namespace a pid that does not run is dead, and this process alive.
    assert not owner_alive(f"{host_prefix()}/{pid_namespace()}/999999999/1")
    from openenv_v1.core.launch.docker.reaper import owner_token

    assert owner_alive(owner_token())


def test_a_sweep_keeps_the_containers_of_an_owner_in_another_pid_namespace(
    real_docker,
):
    """A reaper's sweep of orphans removes a container whose owner in this
    namespace is gone, and keeps one whose owner is in another namespace."""
    foreign = token_from_another_pid_namespace()
    dead = f"{host_prefix()}/{pid_namespace()}/999999999/1"
    run_id = f"test-reaper-pidns-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    created = {}
    try:
        for name, token in (("foreign", foreign), ("dead", dead)):
            result = docker_engine.docker(
                *("create", "--label", f"{MANAGED_LABEL}=1"),
                *("--label", f"{OWNER_LABEL}={token}", "--label", label),
                *("--name", f"reaper-{name}-{os.getpid()}", "--network", "none"),
                *(BASE, "true"),
            )
            created[name] = result.stdout.strip()
        sweep_orphans(docker_engine.DOCKER)
        left = docker_engine.docker(
            "ps", "-aq", "--no-trunc", "--filter", f"label={label}"
        )
        assert left.stdout.split() == [created["foreign"]]
    finally:
        docker_engine.docker("rm", "-f", *created.values(), check=False)


def test_build_locks_live_under_the_users_cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path / "cache"))
    with build_lock("openenv-v1/x:1", timeout_s=5):
        (lock,) = build_lock_dir().iterdir()
    assert build_lock_dir() == tmp_path / "cache" / "build-locks"
    assert stat.S_IMODE(build_lock_dir().stat().st_mode) == 0o700
    assert stat.S_IMODE(lock.stat().st_mode) == 0o600
    monkeypatch.delenv("OPENENV_V1_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_lock_dir() == tmp_path / "xdg" / "openenv-v1" / "build-locks"


def test_a_symlink_planted_at_a_build_lock_is_refused_never_followed(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path))
    with build_lock("openenv-v1/x:1", timeout_s=5):
        (lock,) = build_lock_dir().iterdir()
    lock.unlink()
    victim = tmp_path / "victim"
    lock.symlink_to(victim)
    with pytest.raises(EnvFailure, match="a symlink there is refused"):
        with build_lock("openenv-v1/x:1", timeout_s=5):
            pass
    assert not victim.exists()


def test_a_build_lock_held_past_the_deadline_fails_saying_so(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENENV_V1_CACHE_DIR", str(tmp_path))
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with build_lock("openenv-v1/x:1", timeout_s=5):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        with pytest.raises(EnvFailure, match="another build of openenv-v1/x:1"):
            with build_lock("openenv-v1/x:1", timeout_s=0.5):
                pass
        assert 0.5 <= time.monotonic() - started < 5
    finally:
        release.set()
        thread.join()
    with build_lock("openenv-v1/x:1", timeout_s=1):  # free again once released
        pass


def test_a_network_failure_in_a_build_names_the_host_network_setting():
    output = "#7 [2/3] RUN pip install x\n#7 3.1 Temporary failure in name resolution\n"
    message = build_failure("openenv-v1/x:1", Path("Dockerfile"), output)
    assert 'provider_kwargs.build_network = "host"' in message
    assert "OPENENV_V1_BUILD_NETWORK=host" in message
    # Already on the host's network, or not a network failure: no such advice.
    assert "build_network" not in build_failure(
        "openenv-v1/x:1", Path("Dockerfile"), output, "host"
    )
    assert "build_network" not in build_failure(
        "openenv-v1/x:1", Path("Dockerfile"), "#7 ERROR: exit code: 2\n"
    )


def test_builds_keep_run_steps_off_this_hosts_loopback_unless_asked(
    real_docker, tmp_path, monkeypatch
):
    """A Dockerfile's `RUN` step cannot reach a service on this host's loopback on
    the default build network (the failure names the setting); with
    `build_network` "host" it can."""
    monkeypatch.delenv("OPENENV_V1_BUILD_NETWORK", raising=False)
    with socket.socket() as service:
        service.bind(("127.0.0.1", 0))
        service.listen()
        port = service.getsockname()[1]
        folder = tmp_path / "loopback_env"
        folder.mkdir()
        (folder / "Dockerfile").write_text(
            f"FROM {BASE}\n"
            'RUN python3 -c "import socket; '
            f"socket.create_connection(('127.0.0.1', {port}), 3); print('reached')\"\n"
        )
        try:
            with pytest.raises(EnvFailure) as failed:
                ensure_env_image(folder)
            message = str(failed.value)
            assert "Connection refused" in message
            assert 'provider_kwargs.build_network = "host"' in message
            built = ensure_env_image(folder, network="host")
            assert not built.reused
        finally:
            remove_images("openenv-v1/loopback_env")
