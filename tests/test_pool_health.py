"""A shared server a rollout could not reach is dropped only when it keeps failing
its health checks, not on one missed probe: a busy or briefly stalled server keeps
its other sessions."""

import asyncio
import contextlib
import os
import signal
import time

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import HEALTH_PROBES, ServerPool
from tests.servers import wordle_uvicorns
from tests.test_pool import wordle_target


def stall(pid: int, seconds: float) -> None:
    """Freeze the server process for `seconds` (it answers nothing meanwhile)."""
    os.kill(pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.kill(pid, signal.SIGCONT)


async def test_a_server_that_misses_one_probe_keeps_its_sessions_and_one_that_stays_down_is_replaced():
    pool = ServerPool(wordle_target())
    try:
        async with contextlib.AsyncExitStack() as stack:
            target = EnvTarget(env="local/wordle", pool=pool.local())
            held = await open_episode(target, EpisodeLimits(), stack)
            await held.reset({"word": "crane"})
            (first,) = pool.servers()
            ((uvicorn, _),) = wordle_uvicorns()
            lost, _ = await asyncio.to_thread(pool.lease, os.getpid())
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
