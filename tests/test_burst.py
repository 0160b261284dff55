"""A burst of episodes at once on the shared servers, the way a trainer starts a
batch: every one is leased a session, played and handed back, and the pool grows to
the servers the burst needs. Each verifiers line's environment bursts the way its
binding leases: in process on verifiers 0.4 (every episode runs in the eval
process), over the pool's loopback endpoint on 0.2 (its user simulators); the other
way never runs on that line's OpenEnv client, so it is not repeated there. The full
2,048-episode, 512-in-flight run is benchmarks/scale.py."""

import asyncio
import contextlib

import pytest

from openenv_v1 import verifiers_line
from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.wordle_solver import _words
from tests.servers import WORDLE_APP, WORDLE_PROJECT, wordle_uv_servers

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


@pytest.mark.parametrize("leases", [LINE_LEASES[verifiers_line()]])
async def test_a_burst_of_episodes_all_get_a_session_and_the_pool_grows(leases):
    target = EnvTarget(
        env="local/wordle",
        provider_kwargs={
            "project_path": str(WORDLE_PROJECT),
            "app": WORDLE_APP,
            "env_vars": {"WORDLE_MAX_SESSIONS": str(SESSIONS_PER_SERVER)},
        },
        launch_timeout_s=120,
    )
    pool = ServerPool(target)
    try:
        if leases == "in_process":
            rollout = EnvTarget(env=target.env, pool=pool.local())
        else:
            rollout = EnvTarget(env=target.env, pool_url=pool.serve_http())
        words = list(_words()[0][:BURST])
        all_open = asyncio.Barrier(BURST)
        async with asyncio.timeout(300):
            played = await asyncio.gather(
                *(play(rollout, word, all_open) for word in words)
            )
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
