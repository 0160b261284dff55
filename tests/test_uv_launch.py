"""UV launches of the local Wordle project: it serves, it fails fast, it is stopped."""

import contextlib
import os
import shutil
import socket
import tempfile
from pathlib import Path

import httpx
import pytest

from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.uv import NOT_READY, SupervisedUVProvider
from openenv_v1.core.launch.uv_prepared import CACHE_DIR_VAR
from tests.servers import (
    TEST_ENVS,
    WORDLE_APP,
    WORDLE_PROJECT,
    assert_crash_read_not_waited_out,
    processes_matching,
    wait_until,
    wordle_uv_servers,
    wordle_uvicorns,
)


def uv_target(app: str = WORDLE_APP, **extra) -> EnvTarget:
    return EnvTarget(
        env="local/wordle",
        provider_kwargs={"project_path": str(WORDLE_PROJECT), "app": app, **extra},
        launch_timeout_s=120,
    )


async def test_uv_launch_serves_an_episode_and_stops_the_tree(tmp_path, monkeypatch):
    assert wordle_uv_servers() == []
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(uv_target(), EpisodeLimits(), stack)
        ((pid, _),) = wordle_uvicorns()
        # Its output goes to a temp file unlinked at once: none is left on disk
        # however the server or its owner ends (a SIGKILL runs no cleanup).
        output = os.readlink(f"/proc/{pid}/fd/1")
        assert output.startswith(f"{tmp_path}/openenv-uv-"), output
        assert output.endswith(" (deleted)"), output
        assert list(tmp_path.glob("openenv-uv-*")) == []
        await episode.reset({"word": "crane"})
        await episode.act("[crane]")
        assert episode.report.reward == 1.0
    assert wordle_uv_servers() == []


async def test_wrong_app_fails_fast_with_the_servers_own_error():
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_episode(
                uv_target("wordle_env.no_such_module:app"), EpisodeLimits(), stack
            )
    assert_crash_read_not_waited_out(str(info.value))
    assert "ModuleNotFoundError" in str(info.value)
    assert "wordle_env.no_such_module" in str(info.value)
    assert wordle_uv_servers() == []


async def test_a_server_still_starting_at_its_launch_timeout_fails_saying_so():
    """A real readiness timeout says `NOT_READY`, the words the wrong-app tests rule
    out (`assert_crash_read_not_waited_out`), and its server is stopped."""
    target = EnvTarget(
        env="local/wordle",
        provider_kwargs={
            "project_path": str(WORDLE_PROJECT),
            "app": "slow_start:app",  # ten minutes to import
            "env_vars": {"PYTHONPATH": str(TEST_ENVS)},
        },
        launch_timeout_s=5,
    )
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_episode(target, EpisodeLimits(), stack)
    assert f"{NOT_READY} 5s" in str(info.value)
    assert wait_until(lambda: processes_matching("slow_start:app") == [], 30)


async def test_missing_project_path_is_named():
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure, match="project_path '/nonexistent' is not"):
            await open_episode(
                EnvTarget(env="x/y", provider_kwargs={"project_path": "/nonexistent"}),
                EpisodeLimits(),
                stack,
            )


def launch_and_stop(project: Path) -> tuple[SupervisedUVProvider, str]:
    """Launch `project` until ready; returns the provider and its server's command
    line, read while it ran."""
    provider = SupervisedUVProvider(project_path=str(project), host="127.0.0.1")
    try:
        provider.start()
        provider.wait_for_ready(120)
        assert provider.pid is not None
        cmdline = Path(f"/proc/{provider.pid}/cmdline").read_bytes()
        return provider, cmdline.replace(b"\0", b" ").decode()
    finally:
        provider.stop()


def test_a_repeated_launch_reuses_the_prepared_environment_until_the_project_changes(
    tmp_path, monkeypatch
):
    project = tmp_path / "wordle"
    shutil.copytree(WORDLE_PROJECT, project, ignore=shutil.ignore_patterns(".venv"))
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_VAR, str(cache))

    first, command = launch_and_stop(project)
    assert not first.reused_env and command.startswith("uv run --project")
    assert first.app_choice is not None
    assert first.app_choice.app == "wordle_env.server.app:app"

    again, command = launch_and_stop(project)
    assert again.reused_env and "uv run" not in command
    assert command.startswith(f"{cache}/uv-envs/wordle-env-")

    # A new dependency in pyproject.toml: uv syncs the environment again.
    pyproject = project / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('"uvicorn>=0.30",', '"uvicorn>=0.30", "six",')
    )
    changed, command = launch_and_stop(project)
    assert not changed.reused_env and command.startswith("uv run --project")
    env_dir = next((cache / "uv-envs").iterdir())
    assert list(env_dir.glob("lib/python*/site-packages/six.py"))
    # The project itself is left as a plain `uv run` leaves it, minus the `.venv`.
    assert sorted(p.name for p in project.iterdir()) == [
        "pyproject.toml",
        "uv.lock",
        "wordle_env",
    ]
    assert processes_matching(str(tmp_path)) == []


def test_a_picked_port_taken_before_the_server_binds_it_moves_to_another(
    monkeypatch,
):
    """The launcher's free port is free again until uvicorn binds it; when another
    process takes it first, the server is relaunched on another port and the URL
    the launch returns is the one it serves at. A port the caller gave is not
    moved: the failure names it."""
    from openenv_v1.core.launch import uv as uv_launch

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    picks = iter([port])
    real_pick = uv_launch.find_free_port
    monkeypatch.setattr(uv_launch, "find_free_port", lambda: next(picks, real_pick()))
    provider = SupervisedUVProvider(
        project_path=str(WORDLE_PROJECT), app=WORDLE_APP, host="127.0.0.1"
    )
    try:
        assert provider.start() == f"http://127.0.0.1:{port}"
        url = provider.wait_for_ready(120)
        assert url != f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/health").status_code == 200
    finally:
        provider.stop()

    given = SupervisedUVProvider(
        project_path=str(WORDLE_PROJECT), app=WORDLE_APP, host="127.0.0.1"
    )
    try:
        given.start(port=port)
        with pytest.raises(EnvFailure, match=f"port {port} is in use by another"):
            given.wait_for_ready(120)
    finally:
        given.stop()
        taken.close()
    assert wordle_uv_servers() == []


def test_a_git_project_path_that_looks_like_an_option_runs_no_command(tmp_path):
    """`git+--upload-pack=<command>` is a repository name to `git clone`, not an
    option: the clone fails and the command never runs."""
    from openenv_v1.core.openenv_lines import clone_git_project

    marker = tmp_path / "ran"
    option = f"--upload-pack=touch {marker}"
    with pytest.raises(RuntimeError, match="Failed to clone") as info:
        clone_git_project(f"git+{option}", 30)
    # git took it as the repository (not the clone's folder after an option).
    assert f"repository '{option}' does not exist" in str(info.value)
    assert not marker.exists()
