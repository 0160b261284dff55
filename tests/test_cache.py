"""What launches keep on this machine stays bounded: a prepared environment whose
project is gone goes at the next launch, past the size bound the least recently used
go first, `openenv-v1 cache` lists and prunes environments and env images, and
nothing a running eval uses is ever removed (a real process holds it).

Every test has a cache of its own (`OPENENV_V1_CACHE_DIR`), never the real one."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import uuid
from pathlib import Path

import pytest

from openenv_v1.core import EnvFailure
from openenv_v1.core.launch.cache import (
    MAX_GB_VAR,
    PRUNE_EVERY_S,
    cache_bound,
    prepared_envs,
    prune_at_launch,
    prune_prepared_envs,
)
from openenv_v1.core.launch.docker.build import INPUTS_LABEL, run_build
from openenv_v1.core.launch.docker.cli import DOCKER_VAR
from openenv_v1.core.launch.uv import SupervisedUVProvider
from openenv_v1.core.launch.uv_prepared import (
    CACHE_DIR_VAR,
    SIZE_STAMP,
    USE_DIR,
    hold_prepared_env,
    prepared_env_dir,
    release_prepared_env,
    use_record,
)
from tests import docker_engine
from tests.servers import WORDLE_APP, WORDLE_PROJECT, run_cli, wait_until

ROOT = Path(__file__).resolve().parent.parent
BASE = "ghcr.io/meta-pytorch/openenv-base:latest"
MB = 1_000_000

# A process that holds an environment as a launch does, until its stdin closes.
HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from openenv_v1.core.launch.uv_prepared import hold_prepared_env
    held = hold_prepared_env(Path(sys.argv[1]), sys.argv[2])
    print("held" if held else "not held", flush=True)
    sys.stdin.read()
    """
)
# A process that runs an env server, as an eval's launcher does, until stdin closes.
SERVER_OWNER = textwrap.dedent(
    """
    import sys
    from openenv_v1.core.launch.uv import SupervisedUVProvider
    provider = SupervisedUVProvider(project_path=sys.argv[1], app=sys.argv[2])
    provider.start()
    print(provider.wait_for_ready(120), flush=True)
    sys.stdin.read()
    provider.stop()
    """
)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_VAR, str(root))
    monkeypatch.delenv(MAX_GB_VAR, raising=False)
    # No Docker: a prune here must not reach the engine's images (other tests').
    monkeypatch.setenv(DOCKER_VAR, str(tmp_path / "no-docker"))
    return root


@contextlib.contextmanager
def running(script: str, *args: str):
    """`script` in a process of its own, yielding its first line once printed; its
    stdin is closed (it ends) on the way out."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def make_env(project: Path, size_mb: int, last_use: float) -> Path:
    """A prepared environment of `project` as a launch leaves it: its folder with
    `size_mb` of files, and its use record, last used at `last_use`."""
    env_dir = prepared_env_dir(str(project), project.name)
    env_dir.mkdir(parents=True)
    (env_dir / "lib.bin").write_bytes(os.urandom(size_mb * MB))
    release_prepared_env(hold_prepared_env(env_dir, str(project)))
    os.utime(use_record(env_dir), (last_use, last_use))
    return env_dir


def launch_and_stop(project: Path) -> None:
    provider = SupervisedUVProvider(project_path=str(project), app=WORDLE_APP)
    try:
        provider.start()
        provider.wait_for_ready(120)
    finally:
        provider.stop()


def launch_and_prune(project: Path, cache: Path) -> None:
    """Launch `project` after an hour without a prune, and wait for the prune (a
    thread of the launch's) to end."""
    stamp = cache / USE_DIR / ".pruned"
    old = time.time() - PRUNE_EVERY_S - 1
    os.utime(stamp, (old, old))
    launch_and_stop(project)
    assert wait_until(lambda: stamp.stat().st_mtime > old, timeout=30)


def cli(*args: str) -> str:
    """What `openenv-v1 cache ARGS` prints; it succeeds."""
    result = run_cli("cache", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_removed_projects_environment_goes_at_the_next_launch_unless_in_use(
    cache, tmp_path
):
    """The environment of a removed project is kept while an eval's server runs from
    it (another process), and gone after the next launch once that has stopped."""
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    for project in (gone, kept):
        shutil.copytree(WORDLE_PROJECT, project, ignore=shutil.ignore_patterns(".venv"))
    gone_env = prepared_env_dir(str(gone), "wordle-env")
    with running(SERVER_OWNER, str(gone), WORDLE_APP) as url:
        assert url.startswith("http://127.0.0.1:")
        shutil.rmtree(gone)
        launch_and_prune(kept, cache)
        assert (gone_env / "bin" / "uvicorn").is_file()  # its server still runs
        (listed,) = [e for e in prepared_envs() if e.path == gone_env]
        assert listed.in_use and listed.gone and listed.source == str(gone)
    kept_env = prepared_env_dir(str(kept), "wordle-env")
    (kept_env / SIZE_STAMP).unlink()  # as an earlier openenv-v1 left it
    launch_and_prune(kept, cache)
    assert not gone_env.exists() and not use_record(gone_env).exists()
    assert [e.path for e in prepared_envs()] == [kept_env]
    # Measured when uv synced it, or by the first launch that found it unmeasured.
    assert int((kept_env / SIZE_STAMP).read_text()) == prepared_envs()[0].size > MB


def test_past_the_bound_the_least_recently_used_go_first_never_one_in_use(
    cache, tmp_path
):
    now = time.time()
    projects = [tmp_path / f"p{i}" for i in range(4)]
    for project in projects:
        project.mkdir()
    envs = [make_env(p, 2, now - 3600 * (4 - i)) for i, p in enumerate(projects)]
    # The oldest is held by another process (an eval), so the next two go.
    with running(HOLDER, str(envs[0]), str(projects[0])) as held:
        assert held == "held"
        removed = prune_prepared_envs(max_bytes=int(4.5 * MB))
        assert [e.path for e in removed] == envs[1:3]
    # Its eval's end was its last use.
    assert [e.path for e in prepared_envs()] == [envs[3], envs[0]]
    assert not any(e.exists() for e in envs[1:3])
    assert list((cache / "uv-env-trash").iterdir()) == []


def test_a_launch_prunes_at_most_once_an_hour(cache, tmp_path):
    project = tmp_path / "gone"
    project.mkdir()
    env_dir = make_env(project, 1, time.time())
    shutil.rmtree(project)
    stamp = cache / USE_DIR / ".pruned"
    stamp.write_text("pruned a moment ago\n")

    def launch_prune() -> None:
        prune_at_launch()
        for thread in threading.enumerate():
            if thread.name == "openenv-v1-cache":
                thread.join(timeout=30)

    launch_prune()
    assert env_dir.is_dir()
    old = time.time() - PRUNE_EVERY_S - 1
    os.utime(stamp, (old, old))
    launch_prune()
    assert not env_dir.exists() and stamp.stat().st_mtime > old


def test_the_bound_is_the_setting_else_the_variable_else_ten_gb(monkeypatch):
    monkeypatch.delenv(MAX_GB_VAR, raising=False)
    assert cache_bound() == 10 * 10**9
    monkeypatch.setenv(MAX_GB_VAR, "2.5")
    assert cache_bound() == 25 * 10**8
    assert cache_bound(1) == 10**9
    monkeypatch.setenv(MAX_GB_VAR, "lots")
    with pytest.raises(EnvFailure, match=f"{MAX_GB_VAR}='lots' is not a size in GB"):
        cache_bound()


def test_the_cli_lists_and_prunes_environments(cache, tmp_path):
    now = time.time()
    projects = {n: tmp_path / n for n in ("fresh", "stale", "removed", "held")}
    for project in projects.values():
        project.mkdir()
    envs = {
        name: make_env(project, 1, now - (40 * 86400 if name == "stale" else 60))
        for name, project in projects.items()
    }
    shutil.rmtree(projects["removed"])
    with running(HOLDER, str(envs["held"]), str(projects["held"])):
        listing = cli()
        assert f"prepared environments in {cache}/uv-envs: 4, 4.0 MB of 10.0 GB" in (
            listing
        )
        rows = {line.split()[0]: line for line in listing.splitlines()[1:5]}
        assert rows[envs["held"].name].endswith(f"{projects['held']}  [in use]")
        assert rows[envs["removed"].name].endswith("  [gone]")
        assert "used 5w ago" in rows[envs["stale"].name]
        assert "used 1m ago" in rows[envs["fresh"].name]

        # By default only the removed project's environment goes.
        pruned = cli("prune")
        assert pruned.startswith(f"removed {envs['removed'].name}  1.0 MB")
        assert "1 environments, 0 images removed: 1.0 MB" in pruned
        pruned = cli("prune", "--older-than", "30d")
        assert pruned.startswith(f"removed {envs['stale'].name}  1.0 MB")
        pruned = cli("prune", "--all")
        assert f"removed {envs['fresh'].name}" in pruned
        assert f"kept {envs['held'].name}" in pruned
    assert [e.path for e in prepared_envs()] == [envs["held"]]
    assert "removed" in cli("prune", "--all", "nomatch", envs["held"].name[:4])
    assert prepared_envs() == []


def test_an_environment_an_earlier_version_made_is_kept_for_a_day(cache):
    """It records no project and takes no lock: in use, as far as anyone can tell,
    until unused for a day."""
    env_dir = cache / "uv-envs" / "old-env-0123456789ab"
    env_dir.mkdir(parents=True)
    assert prune_prepared_envs(everything=True) == []
    assert "(project not recorded)  [in use]" in cli()
    day_ago = time.time() - 86401
    os.utime(env_dir, (day_ago, day_ago))
    assert [e.path for e in prune_prepared_envs()] == [env_dir]


def loaded_image(tag: str, created: str) -> None:
    """Load an image made here: one empty layer, `created` as Docker records it, and
    the label openenv-v1's builds carry."""
    layer = io.BytesIO()
    tarfile.open(fileobj=layer, mode="w").close()
    diff_id = "sha256:" + hashlib.sha256(layer.getvalue()).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {"Labels": {INPUTS_LABEL: tag}},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    manifest = [{"Config": "config.json", "RepoTags": [tag], "Layers": ["layer.tar"]}]
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, data in (
            ("layer.tar", layer.getvalue()),
            ("config.json", json.dumps(config).encode()),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    subprocess.run(
        [docker_engine.DOCKER, "load"],
        input=archive.getvalue(),
        check=True,
        capture_output=True,
    )


def test_the_cli_lists_and_prunes_env_images_never_one_in_use(
    cache, real_docker, tmp_path, monkeypatch
):
    monkeypatch.setenv(DOCKER_VAR, real_docker)
    repo = f"openenv-v1/cache_test_env_{uuid.uuid4().hex[:6]}"
    old, fresh = f"{repo}:old", f"{repo}:fresh"
    (tmp_path / "Dockerfile").write_text(f'FROM {BASE}\nCMD ["sleep", "300"]\n')
    container = f"cache-test-{uuid.uuid4().hex[:8]}"
    try:
        run_build(tmp_path, tmp_path / "Dockerfile", fresh, {}, timeout_s=300)
        loaded_image(old, "2020-01-01T00:00:00.5Z")
        listing = cli()
        assert re.search(rf"  {old}  .* built \d+w ago", listing)
        assert f"  {fresh}  " in listing

        assert "0 environments, 0 images removed" in cli("prune", repo)
        pruned = cli("prune", "--older-than", "30d", repo)
        assert pruned.splitlines()[0].startswith(f"removed {old}  ")
        assert "0 environments, 1 images removed" in pruned
        docker_engine.docker("run", "-d", "--rm", "--name", container, fresh)
        pruned = cli("prune", "--all", repo)
        assert pruned.splitlines()[0].startswith(f"kept {fresh}  ")
        assert pruned.splitlines()[0].endswith("[in use]")
        docker_engine.docker("rm", "-f", container)
        pruned = cli("prune", "--all", repo)
        assert pruned.splitlines()[0].startswith(f"removed {fresh}  ")
        assert f"{repo}:" not in cli()
    finally:
        docker_engine.docker("rm", "-f", container, check=False)
        for tag in (old, fresh):
            docker_engine.docker("rmi", "-f", tag, check=False)
