"""`openenv-v1 check --use-docker` with a real engine: its report names the image, the
build (built or reused, seconds) and the container (name, id, where it is reached), and
no container outlives the check, however it ends (normal end, error, SIGTERM,
SIGKILL).

The env is a copy of `tests/envs/docker/code_env` under its own name (`check_env`),
so its image is built here and removed afterwards."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openenv_v1.core.launch.docker.reaper import RUN_LABEL
from tests import docker_engine
from tests.real_docker import CODE_ENV, labelled, remove_labelled, wait_until_gone
from tests.servers import run_cli

# In one pytest-xdist worker: the tests build and remove the same image (the first
# check of each must build it, not find it built by another worker's test).
pytestmark = pytest.mark.xdist_group("docker_check")

CLI = Path(sys.executable).parent / "openenv-v1"
ACTION = '{"code": "print(6 * 7)"}'


@pytest.fixture
def check_env(real_docker, tmp_path):
    """A copy of the code env whose image no other test uses; its images removed
    before (one a killed run left, tagged by the same folder hash, would be reused)
    and at the end."""
    folder = tmp_path / "check_env"
    shutil.copytree(CODE_ENV, folder)
    (folder / "CHECK").write_text(f"built for {__name__}\n")
    remove_check_env_images()
    yield folder
    remove_check_env_images()


def remove_check_env_images() -> None:
    images = docker_engine.docker(
        "images", "-q", "--filter", "reference=openenv-v1/check_env", check=False
    )
    if images.stdout.split():
        docker_engine.docker("rmi", "-f", *set(images.stdout.split()), check=False)


def check_argv(folder: Path, *more: str) -> list[str]:
    """`openenv-v1` arguments checking `folder` in Docker."""
    return [
        "check",
        "--use-docker",
        "--project-path",
        str(folder),
        "--launch-timeout",
        "180",
        *more,
    ]


def started_containers(label: str, since: float) -> list[dict[str, str]]:
    """Id, name and image of each container carrying `label` started since `since`,
    as Docker's event log has them."""
    result = docker_engine.docker(
        "events",
        *("--since", f"{since:.0f}", "--until", f"{time.time():.0f}"),
        *("--filter", f"label={label}", "--filter", "event=start"),
        "--format",
        "{{.ID}} {{.Actor.Attributes.name}} {{.Actor.Attributes.image}}",
        timeout=60,
    )
    return [
        dict(zip(("id", "name", "image"), line.split(), strict=True))
        for line in result.stdout.splitlines()
    ]


def test_check_reports_the_image_its_build_and_the_container(check_env, tmp_path):
    """The first check builds the image, the second reuses it; each names the
    container Docker started (as its event log has it) and its loopback binding, and
    leaves no container behind."""
    run_id = f"test-check-docker-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    env = {**os.environ, "OPENENV_V1_RUN_ID": run_id}
    try:
        since = time.time() - 1
        first = run_cli(
            *check_argv(check_env, "--action", ACTION), timeout=600, env=env
        )
        assert first.returncode == 0, first.stdout + first.stderr
        lines = {line[:12].strip(): line[12:] for line in first.stdout.splitlines()}
        (started,) = started_containers(label, since)
        tag = started["image"]
        assert re.fullmatch(r"openenv-v1/check_env:[0-9a-f]{16}", tag)
        server_dockerfile = check_env / "server" / "Dockerfile"
        assert lines["image"] == f"{tag}  (built from {server_dockerfile})"
        assert re.fullmatch(r"built in [0-9.]+s", lines["build"]), lines["build"]
        found = re.fullmatch(
            r"(\S+) \(id ([0-9a-f]{12})\), on network openenv-v1-isolated at "
            r"([0-9.]+:8000) \(no egress, nothing published\), user 65534:65534, "
            r"ready in [0-9.]+s",
            lines["container"],
        )
        assert found, lines["container"]
        assert found[1] == started["name"] and started["id"].startswith(found[2])
        assert f"http://{found[3]}" in lines["server"]
        assert "reward 1.0, done true" in lines["step"]
        assert labelled(label) == []

        since = time.time() - 1
        again = run_cli(
            *check_argv(check_env, "--json", "--probe-sessions", "0"),
            timeout=600,
            env=env,
        )
        report = json.loads(again.stdout)
        assert report["ok"], report["failure"]
        docker = report["docker"]
        (started,) = started_containers(label, since)
        assert (docker["image"], docker["build"]) == (tag, "reused")
        assert docker["build_s"] < 30
        assert docker["container"] == started["name"]
        assert docker["container_id"] == started["id"]
        assert docker["published"] is None  # the isolated network publishes nothing
        assert docker["network"] == "openenv-v1-isolated"
        assert labelled(label) == []
    finally:
        remove_labelled(label)


@pytest.mark.parametrize("end", ["error", "SIGTERM", "SIGKILL"])
def test_no_container_outlives_check_however_it_ends(check_env, end):
    """The check is held at its step (code that sleeps) with its container up, then it
    fails (its step times out), is stopped (SIGTERM) or killed (SIGKILL): the
    container is gone within 30 s."""
    run_id = f"test-check-docker-{end}-{os.getpid()}"
    label = f"{RUN_LABEL}={run_id}"
    timeout = "3" if end == "error" else "600"
    kwargs = json.dumps({"env_vars": {"CODE_TIMEOUT_S": "600"}})
    check = subprocess.Popen(
        [
            str(CLI),
            *check_argv(
                check_env,
                *("--provider-kwargs", kwargs, "--timeout", timeout),
                *("--action", '{"code": "import time; time.sleep(600)"}'),
            ),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OPENENV_V1_RUN_ID": run_id},
        start_new_session=True,
    )
    try:
        if end == "error":
            out, err = check.communicate(timeout=600)
            assert check.returncode == 1, out + err
            assert "FAILED at step" in out and "did not answer within 3s" in out
        else:
            at_step(label, check)
            check.send_signal(getattr(signal, end))
            check.wait(timeout=60)
        took = wait_until_gone(label, timeout_s=30)
        print(f"{end}: container gone {took:.1f}s after check ended")
    finally:
        if check.poll() is None:
            os.killpg(check.pid, signal.SIGKILL)
            check.wait()
        remove_labelled(label)


def at_step(label: str, check: subprocess.Popen, timeout_s: float = 600) -> None:
    """Wait until the check's container runs the step's code (`docker top`)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if check.poll() is not None:
            out, err = check.communicate()
            pytest.fail(
                f"the check ended (exit {check.returncode}) before its step:\n{out}{err}"
            )
        assert time.monotonic() < deadline, "the check never reached its step"
        for container in labelled(label):
            top = docker_engine.docker("top", container, check=False).stdout
            if "time.sleep(600)" in top:
                return
        time.sleep(0.3)
