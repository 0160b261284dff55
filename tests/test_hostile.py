"""A hostile env server ends only its own episode, with the fault named (verifiers 0.2;
`tests/vf04/test_vf_hostile.py` runs the same on 0.4).

The server (`tests/envs/faulty/hostile_env.py`) speaks OpenEnv's `/ws` protocol itself
and sends whatever an env server could: each task of one eval picks a malformed step
result by its reset kwarg `fault`. Each faulty episode pays 0.5 on its first step,
sends the fault on its second, and would pay 1.0 more on a third: an episode that
carries on past the fault shows it in its reward. Schema faults (served under a path
prefix of the same server) are setup errors, checked on the core's own episodes.
`forward_env` values a failing server echoes are redacted on both launch paths.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from openenv_v1.core import EnvFailure, EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.episode.images import MAX_IMAGE_BYTES, MAX_IMAGES_PER_TURN
from tests.servers import (
    TEST_ENVS,
    WORDLE_PROJECT,
    model_flags,
    policy_server,
    recorded_requests,
    run_eval,
    uvicorn_server,
)

MALFORMED = "the env server sent a malformed result: "
STEP_FAULTS = {
    "string_reward": "the reward must be a number or null, got a string '1.0'",
    "huge_reward": "the reward must be a finite number, got an integer of 400 digits",
    "nan_reward": "the reward must be a finite number, got nan",
    "inf_reward": "the reward must be a finite number, got inf",
    "string_done": "`done` must be true or false, got a string 'yes'",
    "nan_signal": "the reward signal reward_signals.win must be a finite number, "
    "got nan",
    "string_observation": "the observation must be a JSON object, got a string "
    "'you win'",
    "list_observation": "the observation must be a JSON object, got a list [1, 2, 3]",
    "deep_observation": "the observation is nested deeper than 100 levels",
    "no_data": "the frame {'type': 'observation'} has no `data` (a reply carries "
    "its result, the observation, reward and done of a step, in a `data` object)",
    "undecodable_depth": "the frame is nested too deep to decode (deeper than the "
    "JSON decoder's limit of about 1000 levels; an observation may nest at most 100)",
}
"""Each step fault and how the episode's error names it."""
RESET_FAULT = (
    "reset failed: "
    + MALFORMED
    + "the observation must be a JSON object, got a string 'not an object'"
)
IMAGE_FAULTS = ("bomb_image", "many_images")
"""Faults that are bounded in the turn, not errors: the episode plays on."""
ALL_FAULTS = [*STEP_FAULTS, "reset_string_observation", *IMAGE_FAULTS]


@contextlib.contextmanager
def hostile_server() -> Iterator[str]:
    with uvicorn_server("hostile_env:app", app_dir=TEST_ENVS / "faulty") as url:
        yield url


@pytest.fixture(scope="module")
def hostile_url() -> Iterator[str]:
    with hostile_server() as url:
        yield url


def silent_connections(url: str) -> int:
    """Connections the hostile server's silent TCP listener (a remote `$ref`'s
    target) has accepted."""
    return httpx.get(f"{url}/hostile/stats").json()["silent_connections"]


def user_turns(record: Path, fault: str) -> list[dict]:
    """The user turns the model was sent in the episode of `fault` (its last
    request holds the whole conversation)."""
    marker = f"Ready ({fault})."
    requests = [
        r
        for r in recorded_requests(record)
        if any(marker in text_of(m) for m in r["messages"] if m["role"] == "user")
    ]
    assert requests, f"no request of the {fault} episode"
    longest = max(requests, key=lambda r: len(r["messages"]))
    return [m for m in longest["messages"] if m["role"] == "user"]


def text_of(message: dict) -> str:
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p["type"] == "text")


def images_of(message: dict) -> list[bytes]:
    content = message["content"]
    if isinstance(content, str):
        return []
    return [
        base64.b64decode(p["image_url"]["url"].partition(",")[2])
        for p in content
        if p["type"] == "image_url"
    ]


def check_hostile_eval(
    accounts: dict[str, tuple[dict, list[str], float | None]], record: Path
) -> None:
    """The outcome of one eval over `ALL_FAULTS`, on either line: per fault, the
    trace's account (`info["openenv"]`), its error messages and its recorded
    `openenv_reward` (None when the line records none for a failed rollout)."""
    assert sorted(accounts) == sorted(ALL_FAULTS)
    for fault, (account, errors, recorded) in accounts.items():
        assert recorded is None or math.isfinite(recorded), (fault, recorded)
        # None: unscored, the env gave no reward before the fault (env-declares.md).
        assert account["reward"] is None or math.isfinite(account["reward"]), (
            fault,
            account,
        )
        if fault in STEP_FAULTS:
            # Ended at the fault, keeping the first step's 0.5; the error names it.
            (error,) = errors
            assert error.endswith(
                f": step failed: {MALFORMED}{STEP_FAULTS[fault]} (after 1 steps)"
            ), (fault, error)
            assert (account["reward"], account["steps"]) == (0.5, 1), fault
            assert account["stop_reason"] == "error", fault
            assert recorded in (None, 0.5), (fault, recorded)
        elif fault == "reset_string_observation":
            (error,) = errors
            assert error.endswith(f": {RESET_FAULT}"), error
            assert (account["reward"], account["steps"]) == (None, 0)  # unscored
        else:
            assert errors == [], (fault, errors)
            assert (account["reward"], account["steps"]) == (2.0, 3), fault
            assert account["stop_reason"] == "done", fault

    # The bomb never reached the model; its line says why.
    bomb_turn = user_turns(record, "bomb_image")[2]
    assert images_of(bomb_turn) == []
    assert "screen: image ?, refused: a decompression bomb" in text_of(bomb_turn)
    # Twenty 3 MB images: eight sent, each downscaled under the byte bound; the rest
    # named on their lines.
    cameras = user_turns(record, "many_images")[2]
    sent = images_of(cameras)
    assert len(sent) == MAX_IMAGES_PER_TURN
    assert all(len(data) <= MAX_IMAGE_BYTES for data in sent)
    assert Image.open(io.BytesIO(sent[0])).size == (752, 752)
    text = text_of(cameras)
    assert "camera_0: image 1024x1024x3, attached, downscaled to 752x752x3" in text
    for i in range(MAX_IMAGES_PER_TURN, 20):
        line = f"camera_{i}: image 1024x1024x3, not attached (a turn carries at most 8)"
        assert line in text


def test_each_hostile_frame_ends_only_its_own_episode_naming_the_fault(
    hostile_url, tmp_path
):
    record = tmp_path / "requests.jsonl"
    resets = json.dumps([{"fault": fault} for fault in ALL_FAULTS])
    with policy_server("script", script=["go"], record=record) as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", hostile_url]
            + ["--taskset.resets", resets, "-c", "4", *model_flags(policy)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    accounts = {
        trace["task"]["data"]["reset"]["fault"]: (
            trace["info"]["openenv"],
            [e["message"] for e in trace["errors"]],
            trace["rewards"].get("openenv_reward"),
        )
        for trace in traces
    }
    check_hostile_eval(accounts, record)


SCHEMA_FAULTS = {
    "remote_ref": "refers to 'http://127.0.0.1:{silent}/move.json' (at "
    "/properties/move/$ref): only local references (#/$defs/...) are followed, and "
    "nothing is fetched from elsewhere",
    "bad_regex": "is not a valid JSON schema: '([' is not a 'regex' (at "
    "/properties/move/pattern)",
    "dangling_ref": "refers to '#/$defs/Missing' (at /properties/move/$ref), which "
    "is not in the schema",
    "not_object": "must be a JSON object, got list",
    "deep_schema": "is nested deeper than 64 levels",
}


async def test_schema_faults_are_setup_errors_naming_the_fault_and_fetch_nothing(
    hostile_url,
):
    silent = httpx.get(f"{hostile_url}/hostile/stats").json()
    assert silent == {"silent_connections": 0}
    port = _silent_port(hostile_url)
    for variant, fault in SCHEMA_FAULTS.items():
        url = f"{hostile_url}/{variant}"
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure) as info:
                await open_episode(EnvTarget(base_url=url), EpisodeLimits(), stack)
        assert time.monotonic() - started < 5, variant
        assert str(info.value) == (
            f"the action schema at {url}/schema " + fault.format(silent=port)
        )
    # The remote reference's host was never contacted.
    assert silent_connections(hostile_url) == 0


def _silent_port(url: str) -> int:
    ref = httpx.get(f"{url}/remote_ref/schema").json()["action"]["properties"]
    return int(ref["move"]["$ref"].split(":")[2].split("/")[0])


async def test_schema_reads_have_one_deadline_and_a_body_cap(hostile_url):
    """A server that drips its schema a byte at a time never trips a per-read
    timeout; the whole read has one deadline. A huge schema is cut off at the cap,
    and one nested past the JSON decoder is named so."""
    for variant, cause, within in [
        ("slow_schema", "TimeoutError: no complete answer within 2s", 6),
        ("huge_schema", "ValueError: the body is over 4,194,304 bytes", 10),
        (
            "undecodable_schema",
            "ValueError: the body is nested too deep to decode (deeper than the "
            "JSON decoder's limit of about 1000 levels)",
            5,
        ),
    ]:
        url = f"{hostile_url}/{variant}"
        started = time.monotonic()
        async with contextlib.AsyncExitStack() as stack:
            with pytest.raises(EnvFailure) as info:
                await open_episode(
                    EnvTarget(base_url=url), EpisodeLimits(step_timeout_s=2), stack
                )
        assert time.monotonic() - started < within, variant
        assert str(info.value) == (
            f"cannot read the action schema from {url}/schema: {cause}"
        )


async def test_a_recursive_schema_renders_and_plays(hostile_url):
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(
            EnvTarget(base_url=f"{hostile_url}/recursive"), EpisodeLimits(), stack
        )
        opening = (await episode.reset({})).text
        assert '"next":{"anyOf":[{"$ref":"#/$defs/Node"}' in opening
        await episode.act('{"move": "go", "node": {"next": {"next": null}}}')
        assert (episode.report.reward, episode.report.error) == (0.5, None)


SECRET_NAME = "UVICORN_LOOP"
"""A forwarded variable the env server's uvicorn reads and, given a value it cannot
use, quotes in its error: a failing server that echoes a forwarded value."""


@pytest.mark.parametrize("shared", [True, False], ids=["pool", "per-rollout"])
def test_forwarded_values_a_failing_server_echoes_are_redacted_everywhere(
    tmp_path, shared
):
    value = f"sk-test-{secrets.token_hex(8)}"
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT)})
    with policy_server("script", script=["crane"]) as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.env", "local/wordle"]
            + ["--taskset.task.user.provider-kwargs", kwargs]
            + ["--taskset.shared-servers", str(shared).lower()]
            + ["--taskset.task.user.forward-env", json.dumps([SECRET_NAME])]
            + model_flags(policy),
            tmp_path,
            env={SECRET_NAME: value},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    # The server's own output is there, its echo of the value redacted...
    assert 'Import string "<redacted>" must be in format' in error["message"]
    # ... and the value is in no file the eval wrote (traces, eval.log, ...).
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "eval.log" for p in written), written
    for path in written:
        assert value not in path.read_text(errors="replace"), path
