"""A shared server a rollout could not reach is dropped only when it keeps failing
its health checks, not on one missed probe: a busy or briefly stalled server keeps
its other sessions. Busy is told from dead by the server's CPU time: a server that
runs while it answers nothing is given a message's timeout, a stopped one
`HEALTH_PROBES` probes."""

import asyncio
import contextlib
import dataclasses
import os
import signal
import time

import httpx

from openenv_v1.core import EnvEpisode, EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import HEALTH_PROBES, ServerPool
from tests.servers import TEST_ENVS, wordle_uvicorns
from tests.test_pool import wordle_target

BUSY_APP = "busy_wordle:app"  # tests/envs/busy_wordle.py: `GET /test/spin/<seconds>`


def stall(pid: int, seconds: float) -> None:
    """Freeze the server process for `seconds` (it answers nothing meanwhile)."""
    os.kill(pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.kill(pid, signal.SIGCONT)


async def hold_a_session(
    pool: ServerPool, stack: contextlib.AsyncExitStack
) -> tuple[EnvEpisode, str, str]:
    """An episode reset on `pool`'s first server (`crane` wins it), that server's URL,
    and a second lease on it, to hand back as `unreachable`."""
    target = EnvTarget(env="local/wordle", pool=pool.local())
    held = await open_episode(target, EpisodeLimits(), stack)
    await held.reset({"word": "crane"})
    (first,) = pool.servers()
    lost, _ = await asyncio.to_thread(pool.lease, os.getpid())
    return held, first, lost


async def test_a_server_that_misses_one_probe_keeps_its_sessions_and_one_that_stays_down_is_replaced():
    pool = ServerPool(wordle_target())
    try:
        async with contextlib.AsyncExitStack() as stack:
            held, first, lost = await hold_a_session(pool, stack)
            ((uvicorn, _),) = wordle_uvicorns()
            # Stalled past one probe's 2 s timeout, back before the next probe.
            stalled = asyncio.to_thread(stall, uvicorn, 2.5)
            lease = asyncio.to_thread(pool.lease, os.getpid(), unreachable=lost)
            _, (again, url) = await asyncio.gather(stalled, lease)
            assert url == first and pool.servers() == [first]
            await held.act("[crane]")  # the session held all along still plays
            assert held.report.done and held.report.reward == 1.0
            # Stopped for good: dropped after the probes fail, and replaced.
            os.kill(uvicorn, signal.SIGSTOP)
            started = time.monotonic()
            _, url = await asyncio.to_thread(pool.lease, os.getpid(), unreachable=again)
            assert url != first and pool.servers() == [url]
            assert time.monotonic() - started >= 2.0 * HEALTH_PROBES
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(uvicorn, signal.SIGCONT)
        pool.close()


def busy_target(message_timeout_s: float = 60.0) -> EnvTarget:
    target = wordle_target(BUSY_APP, PYTHONPATH=str(TEST_ENVS))
    return dataclasses.replace(target, message_timeout_s=message_timeout_s)


async def test_a_server_too_busy_to_answer_its_probes_keeps_its_sessions():
    pool = ServerPool(busy_target())
    try:
        async with contextlib.AsyncExitStack() as stack:
            held, first, lost = await hold_a_session(pool, stack)
            # Busy past three probes' worth (about 3 s each), answering nothing.
            spin_s = 3.5 * HEALTH_PROBES
            httpx.get(f"{first}/test/spin/{spin_s}", timeout=5).raise_for_status()
            started = time.monotonic()
            _, url = await asyncio.to_thread(pool.lease, os.getpid(), unreachable=lost)
            # Kept, with its session: the lease waited for its probes to pass.
            assert url == first and pool.servers() == [first]
            assert time.monotonic() - started >= spin_s - 1.0
            await held.act("[crane]")
            assert held.report.done and held.report.reward == 1.0
    finally:
        pool.close()


async def test_a_server_that_runs_but_never_answers_is_dropped_after_a_message_timeout():
    pool = ServerPool(busy_target(message_timeout_s=12.0))
    try:
        (lost, first) = await asyncio.to_thread(pool.lease, os.getpid())
        httpx.get(f"{first}/test/spin/60", timeout=5).raise_for_status()
        started = time.monotonic()
        _, url = await asyncio.to_thread(pool.lease, os.getpid(), unreachable=lost)
        waited = time.monotonic() - started
        assert url != first and pool.servers() == [url]
        # Not after three idle probes (it ran throughout), but at the timeout.
        assert 12.0 <= waited < 12.0 + 10.0, waited
    finally:
        pool.close()
