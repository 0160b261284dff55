"""Fault injection: every failure case of issue #3 against real servers on 127.0.0.1.

Most faults come from `tests/envs/faulty/faulty_env.py` (two required action fields, a
reset that rejects a bad `difficulty` and takes no `**kwargs`, a step that hangs or
SIGKILLs its own server, a session limit and a count of refused sessions), served by
uvicorn processes this module starts. Episodes are driven at the core level
(`open_episode` + `EnvEpisode`); two `eval` runs cover what needs the whole verifiers
path. Each failure case and the tests that cover it (here unless a module is named):

- free text while the schema has 2 required fields:
    test_non_actions_get_feedback_and_are_bounded[free-text]
- JSON with a wrong field (`{"guess": ...}`):
    test_non_actions_get_feedback_and_are_bounded[wrong-field];
    test_eval.py::test_misbehaving_policy_ends_cleanly_without_max_turns[wrong-field]
- empty reply, bounded with no --max-turns:
    test_non_actions_get_feedback_and_are_bounded[empty];
    test_eval.py::test_misbehaving_policy_ends_cleanly_without_max_turns[empty]
- base_url on a closed port (ends within seconds, URL and errno in the error):
    test_eval.py::test_closed_port_ends_the_rollout_fast_with_the_cause;
    here also a port that listens but never answers:
    test_silent_port_fails_within_connect_timeout
- reset kwarg the env rejects (fast setup failure with the env's exception text):
    test_rejected_reset_fails_fast_with_env_text;
    test_episode.py::test_rejected_reset_kwargs_name_the_env_error
- unknown reset kwarg (warned once per key; OpenEnv drops it silently):
    test_unknown_reset_kwarg_is_warned_once_per_key;
    test_unknown_reset_kwargs_are_warned_in_the_run_log_when_the_taskset_is_built
- server at capacity (bounded backoff, then a clear error):
    test_capacity_wait_is_bounded_then_named;
    test_capacity_one_serves_concurrent_rollouts_in_turn (eval, 2 concurrent rollouts)
- `uv` not on PATH:
    test_without_any_uv_the_launch_fails_fast (neither PATH nor the `uv` package);
    test_packaged_uv_is_put_on_path
- env server killed mid-episode (clear error; reward and steps stay on the trace):
    test_server_killed_mid_step_keeps_reward_and_steps_on_the_trace (eval);
    test_restarted_server_is_not_silently_rejoined (killed between turns)
- UV launch with a wrong `app` (< 60 s, ModuleNotFoundError):
    test_uv_launch.py::test_wrong_app_fails_fast_with_the_servers_own_error
- step timeout:
    test_step_timeout_ends_the_episode_keeping_what_was_earned
- an MCP env whose list_tools step never answers (openenv-core 0.2.2 servers):
    test_an_mcp_list_tools_step_that_never_answers_fails_within_the_step_timeout;
    test_cli.py::test_check_fails_within_its_timeout_when_list_tools_never_answers
- never step after done:
    test_episode.py::test_no_step_after_done; after a failure:
    test_step_timeout_ends_the_episode_keeping_what_was_earned
- a hostile server (malformed step results, decompression bombs, too many images,
  broken or remote-referencing schemas, a dripping or huge `/schema`, a failing
  server echoing `forward_env` values): test_hostile.py, on its own server
  (`tests/envs/faulty/hostile_env.py`)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openenv_v1.core import (
    EnvFailure,
    EnvTarget,
    EpisodeLimits,
    open_episode,
)
from openenv_v1.core.episode import env_episode as episode_module
from openenv_v1.core.episode.env_source import read_reset_params
from openenv_v1.core.launch import target as target_module
from openenv_v1.core.launch import uv as uv_launch
from openenv_v1.core.launch.target import open_env
from tests.servers import (
    TEST_ENVS,
    WORDLE_PROJECT,
    free_port,
    model_flags,
    policy_server,
    run_eval,
    serve_on_free_port,
    stop,
    uvicorn_server,
    wait_http,
    without_gradio,
)

FAULTY_DIR = TEST_ENVS / "faulty"


def faulty_command(port: int) -> list[str]:
    cmd = [sys.executable, "-m", "uvicorn", "faulty_env:app", "--host", "127.0.0.1"]
    cmd += ["--port", str(port), "--log-level", "warning", "--app-dir", str(FAULTY_DIR)]
    # A hung step must not hold up the shutdown.
    return cmd + ["--timeout-graceful-shutdown", "1"]


def faulty_environ(max_sessions: int) -> dict[str, str]:
    return without_gradio({**os.environ, "FAULTY_MAX_SESSIONS": str(max_sessions)})


def start_faulty(port: int, max_sessions: int) -> subprocess.Popen:
    """A faulty env server on `port` (a restart on the same port)."""
    proc = subprocess.Popen(
        faulty_command(port), env=faulty_environ(max_sessions), start_new_session=True
    )
    wait_http(f"http://127.0.0.1:{port}/health", proc)
    return proc


@contextlib.contextmanager
def faulty_server(max_sessions: int = 8) -> Iterator[tuple[str, subprocess.Popen]]:
    """A faulty env server of this test's own; yields its URL and process."""
    proc, port = serve_on_free_port(
        faulty_command, "/health", faulty_environ(max_sessions)
    )
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def faulty_url() -> Iterator[str]:
    with faulty_server() as (url, _):
        yield url


@pytest.fixture(scope="module")
def single_session_url() -> Iterator[str]:
    """A faulty env server that accepts one session at a time."""
    with faulty_server(max_sessions=1) as (url, _):
        yield url


def refusals(url: str) -> int:
    return httpx.get(f"{url}/faulty/stats").json()["capacity_rejections"]


@contextlib.asynccontextmanager
async def episode_at(url: str, **limits):
    async with contextlib.AsyncExitStack() as stack:
        yield await open_episode(
            EnvTarget(base_url=url), EpisodeLimits(**limits), stack
        )


def move(name: str, amount: int) -> str:
    return json.dumps({"move": name, "amount": amount})


# -- the model's mistakes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        (
            "I would like to score five points, please.",
            "the reply is not a JSON object",
        ),
        (
            '{"guess": "crane"}',
            "the action is invalid: unexpected field 'guess'; missing required "
            "field 'move'; missing required field 'amount'",
        ),
        ("", "the reply was empty"),
    ],
    ids=["free-text", "wrong-field", "empty"],
)
async def test_non_actions_get_feedback_and_are_bounded(faulty_url, reply, problem):
    async with episode_at(faulty_url, max_invalid_actions=3) as episode:
        await episode.reset({})
        first = (await episode.act(reply)).text
        # A feedback turn naming the problem and the format, the env not stepped.
        assert f"Invalid action: {problem}. The environment was not stepped." in first
        assert "2 more invalid actions in a row will end the episode" in first
        assert '"required":["move","amount"]' in first
        assert 'Example: {"move":"...","amount":0}' in first
        await episode.act(reply)
        last = (await episode.act(reply)).text
        report = episode.report
        assert (report.done, report.stop_reason, report.error) == (
            True,
            "invalid_actions",
            None,
        )
        assert (report.steps, report.invalid_actions, report.reward) == (0, 3, 0.0)
        assert "3 invalid actions in a row, so the episode is over" in last
        # Bounded: nothing more happens, whatever the model keeps sending.
        assert (await episode.act(move("score", 1))).text == "The episode is over."
        assert report.steps == 0


# -- connecting, resetting ----------------------------------------------------------------


async def test_silent_port_fails_within_connect_timeout():
    """A port that accepts TCP connections but never answers the WebSocket handshake."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure) as info:
                await open_episode(
                    EnvTarget(base_url=url, connect_timeout_s=1.0),
                    EpisodeLimits(),
                    stack,
                )
    assert time.monotonic() - started < 10
    assert str(info.value).startswith(f"cannot connect to the OpenEnv server at {url}")


async def test_rejected_reset_fails_fast_with_env_text(faulty_url):
    started = time.monotonic()
    async with episode_at(faulty_url) as episode:
        with pytest.raises(EnvFailure) as info:
            await episode.reset({"difficulty": "impossible"})
    assert time.monotonic() - started < 10
    assert str(info.value) == (
        f"{faulty_url}: reset(difficulty='impossible') was rejected (EXECUTION_ERROR): "
        "difficulty 'impossible' is not one of easy, hard"
    )


def warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == episode_module.__name__]


def test_unknown_reset_kwargs_are_warned_in_the_run_log_when_the_taskset_is_built(
    tmp_path, monkeypatch
):
    """The rollouts' own logs are not kept by verifiers, so the taskset warns up
    front, through the logging verifiers' CLI sets up (console and `eval.log`)."""
    from loguru import logger as loguru_logger
    from verifiers.v1.utils.logging import LIBRARY_LOGGER, setup_logging

    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
    from openenv_v1.logs import OUR_LOGGER

    monkeypatch.setattr(episode_module, "_warned_reset_keys", set())
    ours, theirs = logging.getLogger(OUR_LOGGER), logging.getLogger(LIBRARY_LOGGER)
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in (ours, theirs)]
    log_file = tmp_path / "eval.log"
    setup_logging("INFO", log_file=str(log_file), console=False)
    try:
        taskset = OpenEnvTaskset(
            OpenEnvConfig(
                env="local/faulty",
                resets=[{"difficulty": "hard", "level": 3}, {"level": 4}, {}],
                shared_servers=False,
                task={
                    "user": {
                        "provider_kwargs": {
                            "project_path": str(FAULTY_DIR),
                            "app": "faulty_env:app",
                        }
                    }
                },
            )
        )
        taskset.close()
    finally:
        loguru_logger.remove()
        for lg, handlers, level, propagate in saved:
            lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate
    lines = [
        line for line in log_file.read_text().splitlines() if "reset kwarg" in line
    ]
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "WARNING local/faulty: reset kwarg 'level' (in 2 of 3 resets) is not a "
        "parameter of the env's reset (FaultyEnvironment.reset in faulty_env.py); "
        "OpenEnv drops it without telling the env"
    )


async def test_unknown_reset_kwarg_is_warned_once_per_key(
    faulty_url, monkeypatch, caplog
):
    monkeypatch.setattr(episode_module, "_warned_reset_keys", set())

    async def connect_instead_of_launching(target, stack):
        # Only the launch is skipped: the episode reads the env's source from the
        # target's project_path, as for a real UV launch, and talks to a real server.
        return await open_env(EnvTarget(base_url=faulty_url), stack)

    monkeypatch.setattr(target_module, "open_env", connect_instead_of_launching)
    uv_target = EnvTarget(
        env="local/faulty",
        provider_kwargs={"project_path": str(FAULTY_DIR), "app": "faulty_env:app"},
    )
    caplog.set_level(logging.WARNING, logger=episode_module.__name__)
    openings = []
    for kwargs in [
        {"difficulty": "hard", "level": 3},
        {"level": 4, "mode": "fast", "seed": 1},
    ]:
        async with contextlib.AsyncExitStack() as stack:
            episode = await open_episode(uv_target, EpisodeLimits(), stack)
            openings.append((await episode.reset(kwargs)).text)
    # OpenEnv dropped the unknown keys and reset with the rest.
    assert openings[0].startswith("text: Ready (hard).\ndifficulty: hard\n")
    assert openings[1].startswith("text: Ready (easy).\ndifficulty: easy\n")
    assert [r.getMessage() for r in warnings(caplog)] == [
        f"local/faulty: reset kwarg {key!r} is not a parameter of the env's reset "
        "(FaultyEnvironment.reset in faulty_env.py); OpenEnv drops it without "
        "telling the env"
        for key in ("level", "mode")
    ]

    # Without the env's source (a base_url server) nothing is claimed either way;
    # an env whose reset takes **kwargs receives every key.
    caplog.clear()
    async with episode_at(faulty_url) as episode:
        assert episode.reset_params is None
        await episode.reset({"level": 5, "colour": "red"})
    assert warnings(caplog) == []
    wordle = read_reset_params(WORDLE_PROJECT)
    assert wordle is not None and wordle.any_keyword
    assert wordle.unknown({"word": "crane", "level": 5}) == []


# -- capacity -------------------------------------------------------------------------


async def test_capacity_wait_is_bounded_then_named(single_session_url):
    async with episode_at(single_session_url) as holder:
        await holder.reset({})  # takes the only session
        before = refusals(single_session_url)
        started = time.monotonic()
        async with episode_at(single_session_url, capacity_wait_s=3) as late:
            with pytest.raises(EnvFailure) as info:
                await late.reset({})
        elapsed = time.monotonic() - started
        assert 3 <= elapsed < 15
        assert str(info.value) == (
            f"{single_session_url}: server stayed at capacity for 3s: Server at "
            "capacity: 1/1 sessions active. Cannot accept new connections. (raise the "
            "server's session limit or lower concurrency)"
        )
        # Retried with backoff, not given up at the first refusal.
        assert refusals(single_session_url) - before >= 2
        # The session holder was never disturbed.
        await holder.act(move("score", 2))
        assert (holder.report.reward, holder.report.error) == (2.0, None)


def test_capacity_one_serves_concurrent_rollouts_in_turn(single_session_url, tmp_path):
    """Two concurrent rollouts on a one-session server both finish: each is refused
    while the test holds the session, and retried until the session is free."""
    before = refusals(single_session_url)
    held = threading.Event()
    holder_errors: list[BaseException] = []

    async def hold_the_session() -> None:
        async with episode_at(single_session_url) as holder:
            await holder.reset({})
            held.set()
            # Held until the rollouts were refused twice (the other one too, or a
            # retry: either way a refused rollout that is retried).
            deadline = time.monotonic() + 120
            while refusals(single_session_url) - before < 2:
                assert time.monotonic() < deadline, "no rollout came for the session"
                await asyncio.sleep(0.2)

    def run_holder() -> None:
        try:
            asyncio.run(hold_the_session())
        except BaseException as e:
            holder_errors.append(e)
            held.set()

    holder = threading.Thread(target=run_holder)
    holder.start()
    assert held.wait(30) and not holder_errors, holder_errors
    try:
        with policy_server("script", script=[move("finish", 1)]) as policy:
            proc, traces = run_eval(
                [
                    "openenv-v1",
                    "--taskset.base-url",
                    single_session_url,
                    "-r",
                    "2",
                    "-c",
                    "2",
                    "--taskset.task.user.capacity-wait-s",
                    "90",
                    *model_flags(policy),
                ],
                tmp_path,
            )
    finally:
        holder.join(150)
    assert holder_errors == []
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2, proc.stderr[-3000:]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
        assert trace["rewards"]["openenv_reward"] == 1.0
        assert trace["info"]["openenv"]["steps"] == 1
    assert refusals(single_session_url) - before >= 2


# -- launching without uv ----------------------------------------------------------------


def no_uv_on_path(monkeypatch, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert shutil.which("uv") is None


async def test_without_any_uv_the_launch_fails_fast(monkeypatch, tmp_path):
    no_uv_on_path(monkeypatch, tmp_path)
    # ... and the `uv` package's binary unavailable too.
    monkeypatch.setattr(uv_launch, "uv_bin_dir", lambda: None)
    started = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_episode(
                EnvTarget(
                    env="local/wordle",
                    provider_kwargs={"project_path": str(WORDLE_PROJECT)},
                ),
                EpisodeLimits(),
                stack,
            )
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "`uv` executable not found" in message
    assert "install uv, or `uv sync` this project so its packaged uv is used" in message


def test_packaged_uv_is_put_on_path(monkeypatch, tmp_path):
    no_uv_on_path(monkeypatch, tmp_path)
    packaged = uv_launch.uv_bin_dir()
    assert packaged is not None, "the `uv` package is a dependency of this project"
    uv_launch.ensure_uv_on_path()
    assert shutil.which("uv") == str(Path(packaged) / "uv")
    version = subprocess.run(["uv", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("uv ")


# -- the env server fails mid-episode ----------------------------------------------------


@pytest.mark.parametrize(
    "client_timeout_s",
    [60.0, 1.0],
    ids=["own-timer", "client-message-timeout"],
)
async def test_step_timeout_ends_the_episode_keeping_what_was_earned(
    faulty_url, client_timeout_s
):
    # With the client's own message timeout as long as the step's, that one enforces
    # it (no second timer per step); with a longer one, the episode arms its own.
    target = EnvTarget(base_url=faulty_url, message_timeout_s=client_timeout_s)
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(target, EpisodeLimits(step_timeout_s=1), stack)
        await episode.reset({})
        await episode.act(move("score", 2))
        started = time.monotonic()
        text = (await episode.act(move("hang", 30))).text
        assert time.monotonic() - started < 5
        report = episode.report
        assert text == (
            "The environment failed: step did not answer within 1s. The episode is over."
        )
        assert report.error == (
            f"{faulty_url}: step did not answer within 1s (after 1 steps)"
        )
        assert (report.done, report.stop_reason) == (True, "error")
        assert (report.reward, report.steps) == (2.0, 1)
        # Nothing is stepped after a failure (the client would reconnect afresh).
        assert (await episode.act(move("score", 5))).text == "The episode is over."
        assert (report.reward, report.steps) == (2.0, 1)


async def test_an_mcp_list_tools_step_that_never_answers_fails_within_the_step_timeout():
    with uvicorn_server("counter_env:hanging_app", app_dir=TEST_ENVS) as url:
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure) as info:
                await open_episode(
                    EnvTarget(base_url=url), EpisodeLimits(step_timeout_s=2), stack
                )
        assert time.monotonic() - started < 10
    assert "the list_tools step did not answer within 2s" in str(info.value)
    assert "openenv-core 0.2.2 deadlock on MCP steps" in str(info.value)


async def test_restarted_server_is_not_silently_rejoined():
    """A server killed between turns and back on the same port: OpenEnv's client would
    reconnect to a fresh env and carry on, its state lost. With resume off the
    episode ends; on, the fresh session is replayed to where the old one was, checked,
    and the episode goes on."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_faulty(port, 8)
    try:
        for resume in (False, True):
            async with episode_at(url, resume=resume) as episode:
                await episode.reset({"difficulty": "hard"})
                await episode.act(move("score", 2))
                await episode.act(move("score", 3))
                proc.kill()
                proc.wait(10)
                proc = await asyncio.to_thread(start_faulty, port, 8)
                text = (await episode.act(move("score", 4))).text
            if resume:
                report = episode.report
                assert (report.error, report.reward, report.steps) == (None, 9.0, 3)
                assert [r["replayed_steps"] for r in report.resumes] == [2]
                continue
            report = episode.report
            assert report.error == (
                f"{url}: the env server closed the session (it stopped, restarted or "
                "dropped the connection); not reconnecting to a fresh env mid-episode "
                "(after 2 steps)"
            )
            assert text.startswith("The environment failed: the env server closed")
            assert (report.reward, report.steps, report.stop_reason) == (
                5.0,
                2,
                "error",
            )
    finally:
        stop(proc)


def test_server_killed_mid_step_keeps_reward_and_steps_on_the_trace(tmp_path):
    script = [move("score", 2), move("score", 3), move("crash", 0)]
    with faulty_server() as (url, server), policy_server("script", script=script) as p:
        started = time.monotonic()
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", url, *model_flags(p)],
            tmp_path,
        )
        elapsed = time.monotonic() - started
        assert server.poll() is not None, "the crash move should have killed it"
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    # The server is gone for good: resuming (on by default) finds nothing to
    # connect to, and says so after the step's own cause.
    assert error["message"].startswith(
        f"{url}: the env server was lost (ConnectionClosed"
    ), error["message"]
    assert "and resuming on a fresh session failed" in error["message"]
    assert error["message"].endswith("(after 2 steps)")
    account = trace["info"]["openenv"]
    assert (account["reward"], account["steps"]) == (5.0, 2)
    assert account["stop_reason"] == "error"
    assert elapsed < 120


def test_reset_params_are_read_once_then_looked_at_again_after_a_while(
    tmp_path, monkeypatch
):
    """Each episode asks; the folder's files are walked again only after
    `RESET_PARAMS_RECHECK_S`, and an edit is then seen."""
    from openenv_v1.core.episode import env_source

    source = tmp_path / "env.py"
    env = "from openenv.core.env_server import Environment\n\nclass Env(Environment):\n"
    source.write_text(env + "    def reset(self, seed=None): ...\n")
    first = read_reset_params(tmp_path)
    assert first is not None and first.names == {"seed"}
    source.write_text(env + "    def reset(self, seed=None, level=1): ...\n")
    assert read_reset_params(tmp_path) is first  # within the recheck window
    # What an event loop takes without a thread: the recent answer, none for a
    # folder never read, none once the window passed.
    assert env_source.recent_reset_params(tmp_path) == (first,)
    assert env_source.recent_reset_params(tmp_path / "elsewhere") is None
    monkeypatch.setattr(env_source, "RESET_PARAMS_RECHECK_S", 0.0)
    assert env_source.recent_reset_params(tmp_path) is None
    edited = read_reset_params(tmp_path)
    assert edited is not None and edited.names == {"seed", "level"}
