"""A burst of episodes at once on the shared servers, the way a trainer starts a
batch: every one is leased a session, played and handed back, and the pool grows to
the servers the burst needs. Each verifiers line's environment bursts the way its
binding leases: in process on verifiers 0.4 (every episode runs in the eval
process), over the pool's loopback endpoint on 0.2 (its user simulators); the other
way never runs on that line's OpenEnv client, so it is not repeated there. The full
2,048-episode, 512-in-flight run is benchmarks/scale.py.

And a burst that loses servers, SIGKILLed early (the pool still starting) and later
(every server up and full): no episode fails. Those lost before their first model
turn start again on a fresh session; those a killed server held mid-way resume by
a verified replay on another server, and solve their game."""

import asyncio
import contextlib
import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pytest

from openenv_v1 import verifiers_line
from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.launch.pool_launch import STARTS_AT_ONCE
from openenv_v1.core.launch.uvicorn_forks import FORKS_VAR
from openenv_v1.wordle_solver import _words
from tests.servers import (
    WORDLE_APP,
    WORDLE_PROJECT,
    listening_port,
    wordle_forked_servers,
    wordle_uv_servers,
    wordle_uvicorns,
)

BURST = 128
SESSIONS_PER_SERVER = 32
LINE_LEASES = {"vf02": "over_http", "vf04": "in_process"}
"""How each verifiers line's binding leases sessions (vf02/taskset, vf04/env)."""


async def play(
    target: EnvTarget, word: str, all_open: asyncio.Barrier
) -> tuple[float, str]:
    """One episode solved in one guess, once every episode of the burst holds its
    session; its reward and the server it ran on."""
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(), stack)
        await episode.reset({"word": word})
        await all_open.wait()
        await episode.act(f"[{word}]")
        assert episode.report.done
        return episode.report.reward, episode.client.base_url


def wordle_target(sessions: int) -> EnvTarget:
    """The local Wordle env launched by the pool, each server `sessions` at most."""
    return EnvTarget(
        env="local/wordle",
        provider_kwargs={
            "project_path": str(WORDLE_PROJECT),
            "app": WORDLE_APP,
            "env_vars": {"WORDLE_MAX_SESSIONS": str(sessions)},
        },
        launch_timeout_s=120,
    )


class StartsSeen:
    """Samples, on a thread, how many of this checkout's Wordle servers are running
    but not yet up in `pool` (started, not answering)."""

    def __init__(self, pool: ServerPool) -> None:
        self.pool, self.seen = pool, [0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "StartsSeen":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            running = len(wordle_uvicorns())
            self.seen.append(running - len(self.pool.servers()))


@pytest.mark.parametrize("leases", [LINE_LEASES[verifiers_line()]])
async def test_a_burst_of_episodes_all_get_a_session_and_the_pool_grows(leases):
    target = wordle_target(SESSIONS_PER_SERVER)
    pool = ServerPool(target)
    try:
        if leases == "in_process":
            rollout = EnvTarget(env=target.env, pool=pool.local())
        else:
            rollout = EnvTarget(env=target.env, pool_url=pool.serve_http())
        words = list(_words()[0][:BURST])
        all_open = asyncio.Barrier(BURST)
        with StartsSeen(pool) as starts:
            async with asyncio.timeout(300):
                played = await asyncio.gather(
                    *(play(rollout, word, all_open) for word in words)
                )
        # The servers the burst needed started at most `STARTS_AT_ONCE` at a time.
        assert 1 <= max(starts.seen) <= STARTS_AT_ONCE
        assert [reward for reward, _ in played] == [1.0] * BURST
        used = {url for _, url in played}
        # Every session was held at once: the server's limit was learned from its
        # refusals, and the pool launched what the burst needed (one spare at most:
        # a server may be launched while the limit is still being learned).
        assert BURST // SESSIONS_PER_SERVER <= len(used) <= pool.launched()
        assert pool.launched() <= BURST // SESSIONS_PER_SERVER + 1
        assert pool.leases_held() == 0
    finally:
        pool.close()
    assert wordle_uv_servers() == []


# A lost server at scale: episodes played with a model's think time between turns,
# while servers are SIGKILLed early (the first episodes at their first turn, the pool
# still growing; then one starting) and later (every server up, one nearly full).
LOST_EPISODES = 192
LOST_IN_FLIGHT = 64
LOST_SESSIONS = 24
THINK_S = 0.4
"""The model's time per turn: sessions are held long enough for a kill to find them."""
DECOYS = 3
"""Wrong guesses before the answer: turns on which a kill finds an episode mid-way."""
BEFORE_FIRST_TURN = "before its first model turn: "


@dataclass
class Played:
    """One episode as the test saw it."""

    url: str | None = None
    """The server the episode reached its first model turn on (its reset answered)."""
    opened: float = math.inf
    ended: float = math.inf
    done: bool = False
    error: str | None = None
    resumes: list[dict] = field(default_factory=list)
    """Its resumes by replay on a fresh session (`EpisodeReport.resumes`)."""


@dataclass
class Kill:
    url: str | None
    """The server killed (None: one still starting, which had no session)."""
    at: float
    held: set[int] = field(default_factory=set)
    """Episodes with a session on it then, past their first model turn."""
    group: int | None = None
    """Its process group."""


async def play_with_think_time(
    target: EnvTarget,
    word: str,
    decoy: str,
    played: Played,
    limits: EpisodeLimits | None = None,
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        try:
            episode = await open_episode(target, limits or EpisodeLimits(), stack)
            await episode.reset({"word": word})
        except EnvFailure as e:
            played.error, played.ended = f"{BEFORE_FIRST_TURN}{e}", time.monotonic()
            return
        played.url, played.opened = episode.client.base_url, time.monotonic()
        for guess in [decoy] * DECOYS + [word]:
            await asyncio.sleep(THINK_S)
            await episode.act(f"[{guess}]")
            if episode.report.done:
                break
        played.done, played.error = episode.report.done, episode.report.error
        played.resumes = list(episode.report.resumes)
        played.ended = time.monotonic()


def server_groups(pool: ServerPool) -> tuple[dict[str, int], list[int]]:
    """The process group of each server up (by URL), and those of servers starting."""
    up = set(pool.servers())
    ports: dict[str, int] = {}
    forked_unbound: list[int] = []  # a forked server's command line names no port
    forked = {pid for pid, _ in wordle_forked_servers()}
    for pid, cmd in wordle_uv_servers():
        named = re.search(r"--port (\d+)", cmd)
        port = int(named[1]) if named else listening_port(pid)
        with contextlib.suppress(ProcessLookupError):
            if port is not None:
                ports[f"http://127.0.0.1:{port}"] = os.getpgid(pid)
            elif pid in forked:
                forked_unbound.append(os.getpgid(pid))
    starting = [group for url, group in ports.items() if url not in up]
    return {url: group for url, group in ports.items() if url in up}, [
        *starting,
        *forked_unbound,
    ]


def kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def holding(up: Iterable[str], played: list[Played]) -> dict[str, set[int]]:
    """The episodes past their first turn and not yet ended on each server up."""
    now = time.monotonic()
    return {
        url: {i for i, p in enumerate(played) if p.url == url and p.ended > now}
        for url in up
    }


def kill_busiest(pool: ServerPool, played: list[Played]) -> Kill:
    """SIGKILL the server up holding the most episodes past their first turn."""
    up, _ = server_groups(pool)
    now, held = time.monotonic(), holding(up, played)
    url = max(held, key=lambda u: len(held[u]))
    kill_group(up[url])
    return Kill(url, now, held[url], up[url])


async def kill_early_and_late(pool: ServerPool, played: list[Played]) -> list[Kill]:
    """Early: once the first episodes reached their first turn (the pool still
    growing), the busiest server is killed, and then one starting (its replacement,
    or one of the wave). Later: once every server is up and one nearly full, the
    busiest is."""

    def first_turns() -> bool:
        return any(holding(pool.servers(), played).values())

    def full() -> bool:
        up = pool.servers()
        busiest = max(map(len, holding(up, played).values()), default=0)
        return pool.launched() == len(up) and busiest >= LOST_SESSIONS // 2

    def one_starting() -> bool:
        _, starting = server_groups(pool)
        seen[:] = [group for group in starting if group not in killed]
        return bool(seen)

    assert await wait_for(first_turns), "no episode reached its first turn"
    kills = [kill_busiest(pool, played)]
    killed = {kills[0].group}
    seen: list[int] = []
    assert await wait_for(one_starting), "no server started after the first kill"
    # The one seen starting (it may have come up since: killed all the same).
    kill_group(seen[0])
    kills.append(Kill(None, time.monotonic()))
    await asyncio.sleep(1.0)
    assert await wait_for(full), "the pool never came back up and full"
    kills.append(kill_busiest(pool, played))
    return kills


async def wait_for(condition: Callable[[], bool], timeout_s: float = 120) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def run_with_kills(
    pool: ServerPool, rollout: EnvTarget, episodes: int, in_flight: int
) -> tuple[list[Played], list[Kill]]:
    words = list(_words()[0][: episodes + 1])
    played = [Played() for _ in range(episodes)]
    gate = asyncio.Semaphore(in_flight)

    async def one(i: int) -> None:
        async with gate:
            await play_with_think_time(rollout, words[i], words[i + 1], played[i])

    killer = asyncio.create_task(kill_early_and_late(pool, played))
    await asyncio.gather(*(one(i) for i in range(episodes)))
    return played, await killer


def lost_to(kills: list[Kill], played: list[Played]) -> dict[str, set[int]]:
    """The failed episodes of each killed server: those that reached their first
    model turn on it (its reset answered, maybe only just before the kill), the
    sessions it held."""
    return {
        k.url: {i for i, p in enumerate(played) if p.error and p.url == k.url}
        for k in kills
        if k.url
    }


@pytest.mark.parametrize("leases", [LINE_LEASES[verifiers_line()]])
async def test_a_killed_server_costs_no_episode(leases, monkeypatch):
    # Servers started afresh: one is seen starting, and killed so (a server forked
    # from a template is up in a fraction of a second; test_uvicorn_forks kills one).
    monkeypatch.setenv(FORKS_VAR, "0")
    target = wordle_target(LOST_SESSIONS)
    pool = ServerPool(target, sessions_per_server=LOST_SESSIONS)
    try:
        if leases == "in_process":
            rollout = EnvTarget(env=target.env, pool=pool.local())
        else:
            rollout = EnvTarget(env=target.env, pool_url=pool.serve_http())
        async with asyncio.timeout(300):
            played, kills = await run_with_kills(
                pool, rollout, LOST_EPISODES, LOST_IN_FLIGHT
            )
        failed = [p.error for p in played if p.error]
        assert failed == [], failed[:3]
        for kill in kills:
            if kill.url:
                # It held sessions mid-way: the kill was a real one, and those
                # sessions' episodes resumed elsewhere.
                assert kill.held, kill
                assert any(played[i].resumes for i in kill.held), kill
        assert all(p.done for p in played)
        assert pool.leases_held() == 0
    finally:
        pool.close()
    assert wordle_uv_servers() == []
