"""The core on either OpenEnv client line (openenv 0.10 with verifiers 0.2,
openenv-core 0.3.0 with verifiers 0.4): the same names, the same client behaviour.
CI runs this file in both environments, beside the UV launch and pool tests."""

import asyncio
import contextlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.uv import SupervisedUVProvider
from openenv_v1.core.openenv_lines import (
    GIT_URL_PREFIX,
    GenericEnvClient,
    _clone_git_project,
    _hf_space_subdomain,
    clone_git_project,
    hf_space_subdomain,
)
from tests.servers import TEST_ENVS, WORDLE_APP, WORDLE_PROJECT, uvicorn_server


def test_space_ids_map_to_the_same_registry_name_on_both_lines():
    for repo in ["openenv/echo_env", "Org/My.Env-2"]:
        assert hf_space_subdomain(repo) == _hf_space_subdomain(repo)
    assert hf_space_subdomain("openenv/echo_env") == "openenv-echo-env"


def test_a_git_project_path_survives_the_provider_and_names_a_failed_clone(tmp_path):
    url = f"{GIT_URL_PREFIX}file://{tmp_path}/missing.git"
    provider = SupervisedUVProvider(project_path=url)
    assert provider.project_path == url
    for clone in (clone_git_project, _clone_git_project):
        with pytest.raises(RuntimeError, match="missing.git"):
            clone(url, 10.0)


def test_a_local_git_repository_is_cloned(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("x")
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    path = Path(_clone_git_project(f"{GIT_URL_PREFIX}file://{repo}", 30.0))
    assert (path / "README").read_text() == "x"
    shutil.rmtree(path)


async def test_the_client_reports_its_url_and_step_results_carry_metadata():
    target = EnvTarget(
        env="local/wordle",
        provider_kwargs={"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP},
        launch_timeout_s=120,
    )
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(), stack)
        assert isinstance(episode.client, GenericEnvClient)
        assert episode.client.base_url.startswith("http://127.0.0.1:")
        await episode.reset({"word": "crane"})
        await episode.act("[crane]")
        assert episode.report.done and episode.report.reward == 1.0


async def test_loopback_connects_take_no_proxy_and_leave_no_proxy_alone(monkeypatch):
    """Eight clients connecting at once to a loopback server go through no proxy
    (the one set here listens nowhere) and never touch the process's `NO_PROXY`:
    openenv-core 0.3.0's own connect set and restored it around each connect, and
    concurrent connects raced on it."""
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with uvicorn_server("counted_wordle:app", app_dir=TEST_ENVS) as url:
        for name in ("ALL_PROXY", "HTTP_PROXY", "http_proxy"):
            monkeypatch.setenv(name, "http://127.0.0.1:9")  # the discard port
        seen: list[str | None] = []
        done = asyncio.Event()

        async def watch() -> None:
            while not done.is_set():
                seen.append(os.environ.get("NO_PROXY"))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        clients = [
            GenericEnvClient(base_url=url, connect_timeout_s=10, message_timeout_s=10)
            for _ in range(8)
        ]
        async with contextlib.AsyncExitStack() as stack:
            await asyncio.gather(*(stack.enter_async_context(c) for c in clients))
            replies = await asyncio.gather(*(c.reset(seed=1) for c in clients))
        done.set()
        await watcher
    assert [r.done for r in replies] == [False] * 8
    assert len(seen) > 8 and set(seen) == {None}
