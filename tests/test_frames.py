"""A frame from the env server is validated where it enters (`core/episode/frames.py`):
its envelope as the client decodes it (`guard_frames`), then its result
(`read_frame`). In process: the real decoder, no server (`tests/test_hostile.py`
sends the same faults over a real `/ws`)."""

import json

import pytest

from openenv_v1.core.episode.frames import (
    MalformedFrame,
    check_envelope,
    guard_frames,
)


class DecodingClient:
    """The shape `guard_frames` wraps: an object whose `_receive` decodes one raw
    WebSocket message with `json.loads`, as OpenEnv's client does."""

    def __init__(self, raw: str) -> None:
        self.raw = raw

    async def _receive(self) -> dict:
        return json.loads(self.raw)


async def test_a_frame_too_deep_to_decode_is_malformed_naming_the_nesting():
    client = guard_frames(DecodingClient("[" * 100_000 + "]" * 100_000))
    with pytest.raises(MalformedFrame) as caught:
        await client._receive()
    message = str(caught.value)
    assert message.startswith(
        "the env server sent a malformed result: the frame is nested too deep to "
        "decode (deeper than the JSON decoder's limit of about"
    )
    assert "Recursion" not in message


async def test_a_guarded_frame_that_decodes_is_returned_as_it_is():
    frame = {"type": "observation", "data": {"observation": {"text": "hi"}}}
    client = guard_frames(DecodingClient(json.dumps(frame)))
    assert guard_frames(client) is client  # guarding twice wraps once
    assert await client._receive() == frame


def test_a_client_without_receive_is_left_as_it_is():
    client = object()
    assert guard_frames(client) is client


@pytest.mark.parametrize(
    ("frame", "fault"),
    [
        (
            {"type": "observation"},
            "the frame {'type': 'observation'} has no `data` (a reply carries its "
            "result, the observation, reward and done of a step, in a `data` object)",
        ),
        (
            {"type": "observation", "data": "you win"},
            "the frame's `data` must be a JSON object, got a string 'you win'",
        ),
        (
            {"type": "state", "data": None},
            "the frame's `data` must be a JSON object, got null",
        ),
        ([1, 2, 3], "the frame must be a JSON object, got a list [1, 2, 3]"),
        ("done", "the frame must be a JSON object, got a string 'done'"),
    ],
)
def test_a_broken_envelope_is_malformed_naming_what_was_sent(frame, fault):
    with pytest.raises(MalformedFrame) as caught:
        check_envelope(frame)
    assert str(caught.value) == f"the env server sent a malformed result: {fault}"


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "observation", "data": {}},
        {"type": "state", "data": {"step_count": 0}},
        {"type": "error"},  # OpenEnv's client reads an error frame's data itself
        {"type": "error", "data": {"message": "no", "code": "VALIDATION_ERROR"}},
    ],
)
def test_a_whole_envelope_passes(frame):
    check_envelope(frame)
