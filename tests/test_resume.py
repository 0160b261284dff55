"""An episode outlives its server: a session lost after the first model turn is
resumed by a verified replay on a fresh session, and goes on as if nothing happened;
a replay that meets another answer ends the episode, naming where."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.episode.frames import Frame
from openenv_v1.core.episode.replay import ReplayDiverged, ReplayLog
from openenv_v1.core.episode.schema import fetch_action_spec
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.target import server_lost
from openenv_v1.core.launch.url_pool import UrlPool
from tests.servers import (
    TEST_ENVS,
    free_port,
    stop,
    uvicorn_server,
    wait_http,
    without_gradio,
    wordle_uv_servers,
)
from tests.test_pool import kill_wordle_servers, leased, pool_of, wordle_target

GUESSES = ["[pious]", "[slate]", "[crane]"]


async def play_wordle(target: EnvTarget, kill_after: int | None, **limits):
    """One Wordle game (answer `crane`) in three guesses; the pool's servers are
    SIGKILLed after `kill_after` of them. The episode's report."""
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(**limits), stack)
        await episode.reset({"word": "crane"})
        first = episode.client.base_url
        for turn, guess in enumerate(GUESSES):
            if turn == kill_after:
                assert kill_wordle_servers()
            await episode.act(guess)
        return episode.report, first, episode.client.base_url


async def test_a_server_killed_mid_episode_is_resumed_with_the_undisturbed_reward():
    target = wordle_target()
    with pool_of(target, max_servers=1) as (pool, url):
        calm, _, _ = await play_wordle(leased(target, url), kill_after=None)
        assert (calm.done, calm.error, calm.steps) == (True, None, 3)
        report, lost, moved = await play_wordle(leased(target, url), kill_after=2)
        assert report.error is None, report.error
        assert (report.done, report.reward, report.steps) == (True, calm.reward, 3)
        assert report.step_rewards == calm.step_rewards
        assert moved != lost and pool.servers() == [moved]
        [resume] = report.resumes
        assert resume["replayed_steps"] == 2 and resume["server"] == moved
        assert report.info()["resumes"] == report.resumes
    assert wordle_uv_servers() == []


@contextlib.contextmanager
def restartable(app: str) -> Iterator[tuple[str, callable]]:
    """A test env served by uvicorn on a fixed port, and a function that SIGKILLs it
    and serves it again on the same port (a server restarted at its address)."""
    port = free_port()
    argv = [sys.executable, "-m", "uvicorn", app, "--app-dir", str(TEST_ENVS)]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    environ = without_gradio(dict(os.environ))
    url = f"http://127.0.0.1:{port}"

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(argv, env=environ, start_new_session=True)
        wait_http(f"{url}/health", proc, timeout=60)
        return proc

    procs = [start()]

    def restart() -> None:
        os.killpg(procs[-1].pid, signal.SIGKILL)
        procs[-1].wait(10)
        procs.append(start())

    try:
        yield url, restart
    finally:
        for proc in procs:
            stop(proc)


async def test_a_replay_that_meets_another_answer_ends_the_episode_naming_it():
    with restartable("dice_env:app") as (url, restart):
        target = EnvTarget(base_url=url, connect_timeout_s=10)
        async with contextlib.AsyncExitStack() as stack:
            # Lost before any step was answered: nothing it saw differs.
            episode = await open_episode(target, EpisodeLimits(), stack)
            await episode.reset({"seed": 1})
            restart()
            await episode.act('{"message": "roll"}')
            assert (episode.report.error, episode.report.steps) == (None, 1)
            assert [r["replayed_steps"] for r in episode.report.resumes] == [0]
            # Lost after a step: the replay rolls another number.
            restart()
            turn = await episode.act('{"message": "roll"}')
        error = episode.report.error or ""
        assert turn.failed and episode.report.stop_reason == "error"
        assert error.startswith(f"{url}: the env server was lost after 1 steps"), error
        assert (
            "the replay on a fresh session diverged at step 1: `observation.roll`"
            in (error)
        )
        assert error.endswith("(after 1 steps)"), error
        assert episode.report.reward == 0.5  # what was earned stays


def frame(observation: dict, reward: float | None = 0.0, done: bool = False) -> Frame:
    return Frame(observation, reward, done, {})


def test_a_replay_log_leaves_out_id_fields_and_names_the_first_difference():
    log = ReplayLog({"seed": 3})
    log.saw_reset(frame({"board": [1, 2], "episode_id": "a", "metadata": {}}))
    log.saw_step({"move": 1}, frame({"board": [1, 3], "session_id": "x"}, 0.5))
    log.saw_refusal({"move": 9}, "VALIDATION_ERROR")
    log.check(0, frame({"board": [1, 2], "episode_id": "b", "metadata": {}}))
    log.check(1, frame({"board": [1, 3], "session_id": "y"}, 0.5))
    log.check(2, "VALIDATION_ERROR")
    # The same values, written otherwise, are the same answer.
    again = ReplayLog({"seed": 3})
    again.saw_reset(frame({"board": [1.0, 2], "n": {"b": 1, "a": 2}}, reward=1))
    again.check(0, frame({"board": [1, 2.0], "n": {"a": 2, "b": 1}}, reward=1.0))
    with pytest.raises(
        ReplayDiverged,
        match=r"at the reset: `observation.board\[1\]` "
        r"was 2, the replay got 4",
    ):
        log.check(0, frame({"board": [1, 4]}))
    with pytest.raises(
        ReplayDiverged,
        match=r"at step 1: `reward` was 0.5, the "
        r"replay got 1.0",
    ):
        log.check(1, frame({"board": [1, 3]}, 1.0))
    with pytest.raises(
        ReplayDiverged,
        match=r"at step 2: `refused` was "
        r"\"VALIDATION_ERROR\", the replay got absent",
    ):
        log.check(2, frame({}))


def test_resume_is_a_setting_on_both_lines_on_by_default():
    from openenv_v1.settings import EpisodeSettings

    assert EpisodeSettings().limits().resume is True
    assert EpisodeSettings(resume_lost_sessions=False).limits().resume is False


async def test_over_three_base_urls_one_killed_mid_run_loses_nothing():
    """Six Wordle games over three running servers, one of them SIGKILLed once every
    game has played a guess: the games it held resume on the others, and all six
    end solved with the reward an undisturbed game gets."""
    with contextlib.ExitStack() as servers:
        urls = [
            servers.enter_context(
                uvicorn_server("counted_wordle:app", app_dir=TEST_ENVS)
            )
            for _ in range(3)
        ]
        desk = UrlPool(urls)
        target = EnvTarget(base_urls=urls, pool=desk.local(), connect_timeout_s=10)
        try:
            async with contextlib.AsyncExitStack() as stack:
                episodes = [
                    await open_episode(target, EpisodeLimits(), stack) for _ in range(6)
                ]
                for episode in episodes:
                    await episode.reset({"word": "crane"})
                    await episode.act(GUESSES[0])
                where = [episode.client.base_url for episode in episodes]
                assert set(where) == set(urls), where  # spread over all three
                killed = where[0]
                kill_server_at(killed)
                for episode in episodes:
                    for guess in GUESSES[1:]:
                        await episode.act(guess)
        finally:
            desk.close()
    for before, episode in zip(where, episodes, strict=True):
        report = episode.report
        assert (report.error, report.done, report.steps) == (None, True, 3)
        assert report.reward == 1.0
        moved = [r["server"] for r in report.resumes]
        if before == killed:
            assert len(moved) == 1 and moved[0] != killed, report.resumes
        else:
            assert moved == [], report.resumes


def kill_server_at(url: str) -> None:
    """SIGKILL the counted Wordle server at `url` (tests/envs/counted_wordle.py)."""
    os.kill(int(httpx.get(f"{url}/test/pid", timeout=10).text), signal.SIGKILL)


async def test_a_contract_read_whose_connection_is_never_made_is_a_lost_server():
    """A host cut off (a Swarm node whose link went down) answers no SYN: reading the
    action schema there fails after the connect timeout, as a lost server the episode
    may start again elsewhere, not as a slow one. Here a listener whose accept queue
    is full drops every further SYN, as such a host does."""

    listener = socket.create_server(("127.0.0.1", 0), backlog=0)
    port = listener.getsockname()[1]
    queued = []
    try:
        for _ in range(2):  # fill the accept queue; no accept() ever runs
            peer = socket.socket()
            peer.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                peer.connect(("127.0.0.1", port))
            queued.append(peer)
        with pytest.raises(EnvFailure) as failed:
            await fetch_action_spec(
                None, f"http://127.0.0.1:{port}", timeout_s=30, connect_timeout_s=0.5
            )
        assert isinstance(failed.value.__cause__, httpx.ConnectTimeout)
        assert server_lost(failed.value)
        assert not server_lost(TimeoutError("a step the server took, answered late"))
    finally:
        for peer in queued:
            peer.close()
        listener.close()
