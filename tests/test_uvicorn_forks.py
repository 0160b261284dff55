"""A pool's UV servers are forked from one template process that imported the app
once (openenv_v1/core/launch/uvicorn_forks.py): they serve, are replaced when killed,
and go with the pool; an app that leaves a thread running at import is served by
servers started afresh. (The pool's owner killed outright: test_process_ownership.)"""

import asyncio
import contextlib
import os
import signal

from openenv_v1.core import EpisodeLimits, open_episode
from tests.servers import (
    TEST_ENVS,
    listening_port,
    parent_pid,
    processes_matching,
    wait_until,
    wordle_forked_servers,
    wordle_templates_and_forks,
    wordle_uv_servers,
)
from tests.test_pool import leased, play_one_guess, pool_of, wordle_target

WORDS = ["crane", "pious", "slate"]


def templates() -> set[int]:
    """Live template processes of the local Wordle env (not the servers forked)."""
    forked = {pid for pid, _ in wordle_forked_servers()}
    return {pid for pid, _ in wordle_templates_and_forks()} - forked


async def test_a_pools_servers_are_forked_from_one_template_and_serve_episodes():
    target = wordle_target(WORDLE_MAX_SESSIONS="1")
    with pool_of(target, max_servers=3) as (pool, url):
        async with contextlib.AsyncExitStack() as stack:
            opened = [
                open_episode(leased(target, url), EpisodeLimits(), stack) for _ in WORDS
            ]
            episodes = await asyncio.gather(*opened)
            for episode, word in zip(episodes, WORDS, strict=True):
                await episode.reset({"word": word})
                await episode.act(f"[{word}]")
                assert episode.report.done and episode.report.reward == 1.0
            assert len({e.client.base_url for e in episodes}) == 3
        # One template imported the app; each server is its child, on its own port.
        (template,) = templates()
        servers = [pid for pid, _ in wordle_forked_servers()]
        assert [parent_pid(pid) for pid in servers] == [template] * 3
        ports = {f"http://127.0.0.1:{listening_port(pid)}" for pid in servers}
        assert ports == set(pool.servers())
        assert all(os.getpgid(pid) == pid for pid in servers)  # a group each
    assert wordle_uv_servers() == []  # the template and its children are gone


async def test_a_killed_forked_server_is_replaced_by_another_fork():
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        first = await play_one_guess(leased(target, url))
        ((killed, _),) = wordle_forked_servers()
        (template,) = templates()
        os.kill(killed, signal.SIGKILL)
        second = await play_one_guess(leased(target, url))
        assert pool.servers() == [second] and second != first
        ((replacement, _),) = wordle_forked_servers()
        assert replacement != killed and parent_pid(replacement) == template
    assert wordle_uv_servers() == []


async def test_a_killed_template_takes_its_servers_and_the_pool_starts_anew():
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        await play_one_guess(leased(target, url))
        (template,) = templates()
        ((server, _),) = wordle_forked_servers()
        os.kill(template, signal.SIGKILL)
        # Its server gets its death signal (SIGTERM) and stops.
        assert wait_until(lambda: server not in dict(wordle_uv_servers()), 20)
        second = await play_one_guess(leased(target, url))
        assert pool.servers() == [second]
        (new_template,) = templates()
        ((replacement, _),) = wordle_forked_servers()
        assert new_template != template and parent_pid(replacement) == new_template
    assert wordle_uv_servers() == []


def forks_said(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "openenv_v1.core.launch.uvicorn_forks"
    ]


async def test_an_app_that_leaves_a_thread_running_is_served_without_forks(caplog):
    caplog.set_level("INFO", logger="openenv_v1.core.launch.uvicorn_forks")
    app = "threaded_app:app"
    target = wordle_target(app, PYTHONPATH=str(TEST_ENVS))
    with pool_of(target, max_servers=1) as (pool, url):
        await play_one_guess(leased(target, url))
        (line,) = forks_said(caplog)
        assert "not forked from a template (importing the app started 1 thread" in line
        # Its server runs uvicorn's command, as every server did before forks.
        serving = processes_matching(app)
        assert len(serving) == 1 and "/bin/uvicorn threaded_app:app" in serving[0][1]
        # A second server of the pool is started afresh too, with no new template.
        ((killed, _),) = serving
        os.kill(killed, signal.SIGKILL)
        await play_one_guess(leased(target, url))
        assert [p for p, _ in processes_matching(app)] != [killed]
        assert len(processes_matching("uvicorn_template.py", app)) == 0
        assert len(forks_said(caplog)) == 1  # its template was not tried again
    assert processes_matching(app) == []


def forks_of(app: str) -> list[int]:
    """Servers of `app` forked from a template (their parent is one)."""
    found = {pid for pid, _ in processes_matching("uvicorn_template.py", app)}
    return [pid for pid in found if parent_pid(pid) in found]


async def test_a_forked_server_killed_while_it_starts_is_lost_as_a_killed_start(
    caplog,
):
    """Its launch fails (not retried afresh, which a crash would be) and the
    waiting lease gets the next fork."""
    caplog.set_level("WARNING", logger="openenv_v1.core.launch.pool")
    app = "slow_ready:app"
    target = wordle_target(app, PYTHONPATH=str(TEST_ENVS))
    with pool_of(target, max_servers=1) as (pool, url):
        await play_one_guess(leased(target, url))
        (first,) = forks_of(app)
        os.kill(first, signal.SIGKILL)
        playing = asyncio.create_task(play_one_guess(leased(target, url)))

        # Its replacement, killed while its startup sleeps (it has no port yet).
        def replacement() -> set[int]:
            return set(forks_of(app)) - {first}

        assert await asyncio.to_thread(wait_until, replacement, 60)
        (starting,) = replacement()
        assert listening_port(starting) is None
        os.kill(starting, signal.SIGKILL)
        second = await playing
        assert pool.servers() == [second]
        (third,) = forks_of(app)
        assert third not in (first, starting)
    lost = [r.getMessage() for r in caplog.records if "lost starting" in r.getMessage()]
    assert len(lost) == 1 and "exited with code -9 before it was ready" in lost[0]
    assert processes_matching(app) == []
