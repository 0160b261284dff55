"""UV launches of the local Wordle project: it serves, it fails fast, it is stopped."""

import contextlib
import time

import pytest

from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_episode
from tests.servers import (
    WORDLE_APP,
    WORDLE_PROJECT,
    wordle_uv_servers,
)


def uv_target(app: str = WORDLE_APP, **extra) -> EnvTarget:
    return EnvTarget(
        env="local/wordle",
        provider_kwargs={"project_path": str(WORDLE_PROJECT), "app": app, **extra},
        launch_timeout_s=120,
    )


async def test_uv_launch_serves_an_episode_and_stops_the_tree():
    assert wordle_uv_servers() == []
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(uv_target(), EpisodeLimits(), stack)
        assert len(wordle_uv_servers()) >= 2  # uv and, under it, uvicorn
        await episode.reset({"word": "crane"})
        await episode.act("[crane]")
        assert episode.report.reward == 1.0
    assert wordle_uv_servers() == []


async def test_wrong_app_fails_fast_with_the_servers_own_error():
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_episode(
                uv_target("wordle_env.no_such_module:app"), EpisodeLimits(), stack
            )
    assert time.monotonic() - started < 60
    assert "ModuleNotFoundError" in str(info.value)
    assert "wordle_env.no_such_module" in str(info.value)
    assert wordle_uv_servers() == []


async def test_missing_project_path_is_named():
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure, match="project_path '/nonexistent' is not"):
            await open_episode(
                EnvTarget(env="x/y", provider_kwargs={"project_path": "/nonexistent"}),
                EpisodeLimits(),
                stack,
            )
