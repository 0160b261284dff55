"""Launched env servers never outlive their owner, on every way an eval or rollout ends.

Normal ends are checked where those evals run (test_eval.py, test_pool.py); here: the
eval killed or interrupted mid-episode, with shared and per-rollout servers, and a
rollout cancelled while it launches or plays.
"""

import asyncio
import contextlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.launch.pool import ServerPool
from tests import zygote
from tests.servers import (
    ROOT,
    WORDLE_APP,
    WORDLE_PROJECT,
    eval_environ,
    policy_server,
    read_traces,
    recorded_requests,
    tool_servers,
    user_simulators,
    wait_until,
    wordle_forked_servers,
    wordle_uv_eval_command,
    wordle_uv_servers,
    wordle_uvicorns,
)


@pytest.mark.parametrize(
    ("sig", "shared", "native"),
    [
        (signal.SIGKILL, True, False),
        (signal.SIGKILL, False, False),
        (signal.SIGTERM, True, False),
        (signal.SIGTERM, False, False),
        (signal.SIGINT, True, False),
        (signal.SIGKILL, True, True),
        (signal.SIGKILL, False, True),
    ],
    ids=[
        "sigkill-shared",
        "sigkill-per-rollout",
        "sigterm-shared",
        "sigterm-per-rollout",
        "sigint-shared",
        "sigkill-shared-native",
        "sigkill-per-rollout-native",
    ],
)
def test_signalled_eval_leaves_no_env_server(tmp_path, sig, shared, native):
    """With native tool calling the eval also runs its one tool server
    (`openenv_v1.vf02.tools`), which must go too."""
    assert wordle_uv_servers() == []
    modes = ["--taskset.tool-calls", "native"]
    # A slow policy keeps the episodes in flight while the eval is signalled.
    record = tmp_path / "requests.jsonl"
    with policy_server("slow", delay=120, record=record) as policy:
        eval_proc = zygote.start(
            wordle_uv_eval_command(
                policy,
                '[{"seed": 1}, {"seed": 2}]',
                "--taskset.shared-servers",
                str(shared).lower(),
                *(modes if native else []),
            ),
            cwd=tmp_path,
            env=eval_environ(),
        )
        try:
            # One shared server, or one per rollout.
            expected = 1 if shared else 2
            assert wait_until(
                lambda: (
                    len(wordle_uvicorns()) >= expected or eval_proc.poll() is not None
                ),
                180,
            )
            assert eval_proc.poll() is None, "eval ended before the envs were up"
            assert wait_until(lambda: len(user_simulators()) >= 2, 60)
            assert len(tool_servers()) == (1 if native else 0)
            # Both episodes have reached the model, so both user simulators serve.
            # (verifiers asks for their parent-death signal only once a user
            # simulator serves: one still importing when the eval is SIGKILLed
            # would outlive it, whatever this adapter does.)
            assert wait_until(lambda: len(recorded_requests(record)) >= 2, 120)
        finally:
            eval_proc.send_signal(sig)
            try:
                eval_proc.wait(60)  # a hang, not a slow stop on a loaded machine
            except subprocess.TimeoutExpired:
                eval_proc.kill()
                raise
        assert wait_until(lambda: wordle_uv_servers() == [], 20), wordle_uv_servers()
        assert wait_until(lambda: user_simulators() == [], 20), user_simulators()
        assert wait_until(lambda: tool_servers() == [], 20)


@pytest.mark.long
def test_a_rollout_cut_off_stops_its_own_server_once_the_next_starts(tmp_path):
    """Per-rollout servers, one rollout at a time, each cut off mid-episode by the
    rollout timeout (verifiers tears its user simulator down). A cut-off rollout's
    server may still be shutting down as the next rollout launches its own, but it
    must be gone within seconds; a server left behind lives through the whole next
    rollout (about 10 s here) and past the eval."""
    assert wordle_uv_servers() == []
    lifetimes: dict[int, list[float]] = {}  # uvicorn pid of each server -> first, last
    # Each model reply takes longer than the rollout may (8 s > 5 s); the eval still
    # waits out the last one before it exits.
    with policy_server("slow", delay=8) as policy:
        eval_proc = zygote.start(
            wordle_uv_eval_command(
                policy,
                '[{"seed": 1}, {"seed": 2}]',
                "--taskset.shared-servers",
                "false",
                "-c",
                "1",
                "--timeout.rollout",
                "5",
            ),
            cwd=tmp_path,
            env=eval_environ(),
        )
        try:
            deadline = time.monotonic() + 240
            while eval_proc.poll() is None and time.monotonic() < deadline:
                now = time.monotonic()
                for pid, _ in wordle_uvicorns():
                    lifetimes.setdefault(pid, [now, now])[1] = now
                time.sleep(0.1)
        finally:
            if eval_proc.poll() is None:
                eval_proc.kill()
    assert eval_proc.returncode == 0
    traces = read_traces(tmp_path)
    assert [t["stop_condition"] for t in traces] == ["harness_timeout"] * 2
    first, second = sorted(lifetimes.values())  # one server per rollout
    assert first[1] - second[0] < 5, f"overlap of {first[1] - second[0]:.1f}s"
    assert wait_until(lambda: wordle_uv_servers() == [], 20)


def uv_target(**extra) -> EnvTarget:
    return EnvTarget(
        env="local/wordle",
        provider_kwargs={"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP},
        launch_timeout_s=120,
        **extra,
    )


async def play(target: EnvTarget, started: asyncio.Event) -> None:
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(), stack)
        await episode.reset({"seed": 1})
        started.set()
        await asyncio.sleep(3600)


@pytest.mark.parametrize("when", ["launching", "playing"])
async def test_a_cancelled_rollout_stops_the_server_it_launched(when):
    started = asyncio.Event()
    rollout = asyncio.create_task(play(uv_target(), started))
    if when == "launching":
        await asyncio.to_thread(wait_until, lambda: len(wordle_uv_servers()) >= 1, 60)
    else:
        await asyncio.wait_for(started.wait(), 120)
    assert wordle_uv_servers() != []
    rollout.cancel()
    with pytest.raises(asyncio.CancelledError):
        await rollout
    assert wordle_uv_servers() == []


async def test_a_cancelled_rollout_hands_back_its_shared_server():
    pool = ServerPool(uv_target(), sessions_per_server=1, max_servers=1)
    try:
        target = uv_target(pool_url=pool.serve_http())
        started = asyncio.Event()
        rollout = asyncio.create_task(play(target, started))
        await asyncio.wait_for(started.wait(), 120)
        rollout.cancel()
        with pytest.raises(asyncio.CancelledError):
            await rollout
        # Its one session is free again: the next rollout gets it at once.
        second = asyncio.Event()
        follower = asyncio.create_task(play(target, second))
        await asyncio.wait_for(second.wait(), 30)
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        assert len(pool.servers()) == 1
    finally:
        pool.close()
    assert wordle_uv_servers() == []


POOL_OWNER = textwrap.dedent(
    """
    import asyncio, contextlib, sys, time
    from openenv_v1.core import EpisodeLimits, open_episode
    from tests.test_pool import leased, pool_of, wordle_target

    async def main():
        target = wordle_target(WORDLE_MAX_SESSIONS="1")
        with pool_of(target, max_servers=2) as (pool, url):
            async with contextlib.AsyncExitStack() as stack:
                opened = [open_episode(leased(target, url), EpisodeLimits(), stack)
                          for _ in range(2)]
                for episode in await asyncio.gather(*opened):
                    await episode.reset({"word": "crane"})
                print("up", flush=True)
                time.sleep(3600)

    asyncio.run(main())
    """
)


def test_a_pool_owner_killed_outright_leaves_no_forked_server_nor_template():
    """Its template dies with the pool's owner thread, its forked servers with it."""
    assert wordle_uv_servers() == []
    owner = subprocess.Popen(
        [sys.executable, "-c", POOL_OWNER], cwd=ROOT, stdout=subprocess.PIPE
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline() == b"up\n"
        assert len(wordle_forked_servers()) == 2
    finally:
        owner.kill()
        owner.wait(30)
    assert wait_until(lambda: wordle_uv_servers() == [], 20), wordle_uv_servers()
