"""Shared env servers: one UV launch serves many rollouts, each on its own session."""

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.launch.uv_prepared import CACHE_DIR_VAR
from openenv_v1.core.launch.uvicorn_forks import FORKS_VAR
from openenv_v1.core.setting_names import render_settings
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
from tests.setting_spellings import SURFACES


def wordle_target(app: str = WORDLE_APP, **env_vars: str) -> EnvTarget:
    kwargs = {"project_path": str(WORDLE_PROJECT), "app": app}
    if env_vars:
        kwargs["env_vars"] = env_vars
    return EnvTarget(env="local/wordle", provider_kwargs=kwargs, launch_timeout_s=120)


@contextlib.contextmanager
def pool_of(target: EnvTarget, **options):
    pool = ServerPool(target, **options)
    try:
        yield pool, pool.serve_http()
    finally:
        pool.close()


def leased(target: EnvTarget, pool_url: str) -> EnvTarget:
    return EnvTarget(env=target.env, pool_url=pool_url, connect_timeout_s=10)


async def test_rollouts_share_one_server_without_seeing_each_others_state():
    target = wordle_target()
    with pool_of(target) as (pool, url):
        async with contextlib.AsyncExitStack() as stack:
            first = await open_episode(leased(target, url), EpisodeLimits(), stack)
            second = await open_episode(leased(target, url), EpisodeLimits(), stack)
            assert len(pool.servers()) == 1
            assert first.client.base_url == second.client.base_url
            await first.reset({"word": "crane"})
            await second.reset({"word": "pious"})
            # Solving one game must not touch the other session's game.
            await first.act("[crane]")
            assert first.report.done and first.report.reward == 1.0
            await second.act("[crane]")
            assert not second.report.done and second.report.reward == 0.0
            await second.act("[pious]")
            assert second.report.done and second.report.reward == 1.0
        assert len(wordle_uvicorns()) == 1  # the server outlives the rollouts
    assert wordle_uv_servers() == []


async def test_a_full_server_makes_the_pool_launch_another():
    target = wordle_target(WORDLE_MAX_SESSIONS="1")
    with pool_of(target, max_servers=2) as (pool, url):
        async with contextlib.AsyncExitStack() as stack:
            episodes = await asyncio.gather(
                open_episode(leased(target, url), EpisodeLimits(), stack),
                open_episode(leased(target, url), EpisodeLimits(), stack),
            )
            assert len({e.client.base_url for e in episodes}) == 2
            assert len(pool.servers()) == 2
            for episode, word in zip(episodes, ["crane", "pious"], strict=True):
                await episode.reset({"word": word})
                await episode.act(f"[{word}]")
                assert episode.report.reward == 1.0
        # Both sessions ended, so a third rollout fits without a third server.
        async with contextlib.AsyncExitStack() as stack:
            await open_episode(leased(target, url), EpisodeLimits(), stack)
        assert len(pool.servers()) == 2
    assert wordle_uv_servers() == []


async def test_all_servers_full_waits_then_names_the_limit():
    target = wordle_target(WORDLE_MAX_SESSIONS="1")
    with pool_of(target, max_servers=1, capacity_wait_s=2) as (_, url):
        async with contextlib.AsyncExitStack() as stack:
            await open_episode(leased(target, url), EpisodeLimits(), stack)
            started = time.monotonic()
            with pytest.raises(EnvFailure, match="session limit.*max_servers") as info:
                await open_episode(leased(target, url), EpisodeLimits(), stack)
            assert time.monotonic() - started < 30
    assert wordle_uv_servers() == []
    vf02, vf04, check = (render_settings(str(info.value), s) for s in SURFACES)
    assert "(`--taskset.max-servers 1` is set; raise `--taskset.max-servers` or" in vf02
    assert "(`--env.taskset.max-servers 1` is set; raise `--env.taskset.max-" in vf04
    assert "(`max_servers = 1` is set; raise `max_servers` or the server's" in check


async def test_a_failed_launch_fails_every_lease_at_once_with_its_cause():
    target = wordle_target("wordle_env.no_such_module:app")
    with pool_of(target) as (_, url):
        async with contextlib.AsyncExitStack() as stack:
            results = await asyncio.gather(
                open_episode(leased(target, url), EpisodeLimits(), stack),
                open_episode(leased(target, url), EpisodeLimits(), stack),
                return_exceptions=True,
            )
    for result in results:
        assert isinstance(result, EnvFailure)
        assert_crash_read_not_waited_out(str(result))
        assert "ModuleNotFoundError" in str(result)
        assert "wordle_env.no_such_module" in str(result)
    assert wordle_uv_servers() == []


def test_leases_of_dead_processes_are_reclaimed():
    target = wordle_target()
    with pool_of(target, sessions_per_server=1, max_servers=1) as (pool, _):
        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        _, first_url = pool.lease(gone.pid)
        # The only slot is held by a process that no longer exists: reclaimed.
        lease, url = pool.lease(os.getpid())
        assert url == first_url
        pool.release(lease)
    assert wordle_uv_servers() == []


async def play_one_guess(target: EnvTarget) -> str:
    """Open a leased episode, play a guess, and return the server it ran on."""
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(), stack)
        await episode.reset({"word": "crane"})
        await episode.act("[crane]")
        assert episode.report.done and episode.report.reward == 1.0
        return episode.client.base_url


async def test_a_killed_server_is_replaced():
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        await play_one_guess(leased(target, url))
        killed = {pid for pid, _ in wordle_uv_servers()}
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        # Leased right away, possibly before the pool can see the process is gone:
        # the rollout's failed connect hands the lease back and gets a fresh server.
        await play_one_guess(leased(target, url))
        assert len(pool.servers()) == 1
        assert killed.isdisjoint(pid for pid, _ in wordle_uv_servers())
    assert wordle_uv_servers() == []


def kill_wordle_servers() -> set[int]:
    killed = {pid for pid, _ in wordle_uv_servers()}
    for pid in killed:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return killed


async def test_a_server_lost_before_the_first_turn_costs_no_episode_and_one_lost_later_ends_it_named():
    """With resume off (tests/test_resume.py: on, the later loss is resumed)."""
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        async with contextlib.AsyncExitStack() as stack:
            limits = EpisodeLimits(resume=False)
            episode = await open_episode(leased(target, url), limits, stack)
            lost = episode.client.base_url
            killed = kill_wordle_servers()
            # The reset finds the server gone: no model turn was spent, so the
            # episode starts again on the pool's replacement.
            await episode.reset({"word": "crane"})
            await episode.act("[pious]")  # the fresh session plays
            assert (episode.report.steps, episode.report.error) == (1, None)
            assert episode.client.base_url != lost
            assert pool.servers() == [episode.client.base_url]
            assert killed.isdisjoint(pid for pid, _ in wordle_uv_servers())
            kill_wordle_servers()
            # Mid-way, the same loss ends the episode, named, on no fresh session.
            await episode.act("[crane]")
            assert re.search(
                r"^local/wordle: (the env server closed the session|step failed: "
                r"ConnectionClosed).*\(after 1 steps\)$",
                episode.report.error or "",
            ), episode.report.error
    assert wordle_uv_servers() == []


async def test_a_pool_that_lost_every_server_grows_back_at_the_limit_it_learned(
    monkeypatch,
):
    # Servers started afresh: slow enough to be killed while one starts (a server
    # forked from a template is up in a fraction of a second).
    monkeypatch.setenv(FORKS_VAR, "0")
    target = wordle_target(WORDLE_MAX_SESSIONS="2")
    with pool_of(target) as (pool, url):
        async with contextlib.AsyncExitStack() as stack:
            opened = [
                open_episode(leased(target, url), EpisodeLimits(), stack)
                for _ in range(3)
            ]
            await asyncio.gather(*opened)
            assert pool.launched() == 2  # the limit of 2 was learned on a refusal
        kill_wordle_servers()
        await asyncio.sleep(0.5)  # past the pool's reaping interval
        waiting = [
            asyncio.create_task(asyncio.to_thread(pool.lease, os.getpid()))
            for _ in "abcd"
        ]
        # The dead servers are dropped and one replacement starts; the leases wait
        # for it, and it is killed while it starts: no server is left.
        assert await asyncio.to_thread(wait_until, wordle_uv_servers, 60)
        await asyncio.sleep(0.5)
        kill_wordle_servers()
        # Four leases waiting: two servers at the learned limit, not four.
        leases = await asyncio.gather(*waiting)
        assert pool.launched() == 2
        for lease, _ in leases:
            pool.release(lease)
    assert wordle_uv_servers() == []


@pytest.mark.parametrize(
    "fault",
    [
        # uvicorn alive and listening, never answering: the connect times out.
        "hung",
        # uvicorn gone while `uv` still looks alive (the moment between the two
        # exits, held open here): the connect is refused.
        "refusing",
    ],
)
async def test_a_server_that_stops_answering_is_dropped_killed_and_replaced(
    fault, tmp_path, monkeypatch
):
    if fault == "refusing":
        # A launch that syncs a new prepared environment runs under `uv run`.
        monkeypatch.setenv(CACHE_DIR_VAR, str(tmp_path))
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        await play_one_guess(leased(target, url))
        uv = [pid for pid, cmd in wordle_uv_servers() if "uv run" in cmd]
        uvicorn = [pid for pid, _ in wordle_uvicorns()]
        old = {*uv, *uvicorn}  # the server, not a template it was forked from
        assert uvicorn and (uv or fault == "hung")
        frozen = uvicorn if fault == "hung" else uv
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        if fault == "refusing":
            for pid in uvicorn:
                os.kill(pid, signal.SIGKILL)
        try:
            quick = EnvTarget(env=target.env, pool_url=url, connect_timeout_s=2)
            second = await play_one_guess(quick)
            assert pool.servers() == [second]
            deadline = time.monotonic() + 10
            while set(old) & {pid for pid, _ in wordle_uv_servers()}:
                assert time.monotonic() < deadline, "the broken server was not killed"
                await asyncio.sleep(0.1)
        finally:
            for pid in frozen:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
    assert wordle_uv_servers() == []


SPACE_ENV = TEST_ENVS / "layouts" / "space_env"


@pytest.mark.parametrize(
    "env_vars",
    [
        # repl_env-like: `state` is an error until the first reset.
        {"GUESS_STATE_BEFORE_RESET_FAILS": "1"},
        # git_env-like: each session's env takes longer to build than the connect
        # timeout.
        {"GUESS_BUILD_DELAY_S": "4"},
    ],
    ids=["state-refused-before-reset", "slow-env-build"],
)
async def test_a_leased_session_is_kept_when_its_env_errs_on_state_or_builds_slowly(
    env_vars,
):
    target = EnvTarget(
        env="local/space_env",
        provider_kwargs={"project_path": str(SPACE_ENV), "env_vars": env_vars},
        launch_timeout_s=120,
    )
    with pool_of(target) as (_, url):
        rollout = EnvTarget(env=target.env, pool_url=url, connect_timeout_s=2)
        async with contextlib.AsyncExitStack() as stack:
            episode = await open_episode(rollout, EpisodeLimits(), stack)
            await episode.reset({"seed": 1})
            await episode.act('{"guess": 8}')
            assert (episode.report.reward, episode.report.stop_reason) == (1.0, "done")


def test_a_launch_cancelled_by_closing_the_pool_is_not_logged_as_an_error(caplog):
    target = wordle_target("slow_start:app", PYTHONPATH=str(TEST_ENVS))
    caplog.set_level("INFO", logger="openenv_v1.core.launch.pool")
    with pool_of(target) as (pool, _):
        waiter = threading.Thread(target=_lease_quietly, args=(pool,), daemon=True)
        waiter.start()
        assert wait_until(lambda: processes_matching("slow_start:app") != [], 60)
    waiter.join(30)

    def launch_records() -> list:
        # The launch's own thread says how it ended, once the stopped server is gone.
        return [
            r
            for r in caplog.records
            if r.name == "openenv_v1.core.launch.pool"
            and (r.levelname == "ERROR" or "cancelled" in r.getMessage())
        ]

    assert wait_until(lambda: launch_records() != [], 30)
    (record,) = launch_records()
    assert record.levelname == "INFO", record.getMessage()
    assert "launch of local/wordle cancelled: the pool closed" in record.getMessage()


def _lease_quietly(pool: ServerPool) -> None:
    with contextlib.suppress(Exception):
        pool.lease(os.getpid())
