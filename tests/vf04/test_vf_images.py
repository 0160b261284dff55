"""verifiers 0.4: image observations reach the model as PNG parts of the user turn,
through the in-process chat harness and verifiers' interception."""

from collections.abc import Iterator

import pytest

from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    recorded_requests,
    uvicorn_server,
)
from tests.test_image_evals import parts
from tests.vf04.evals import run_vf_eval, traces_of


@pytest.fixture(scope="module")
def atari_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:atari_app", app_dir=TEST_ENVS) as url:
        yield url


def test_atari_like_frames_go_as_one_png_per_observation(atari_url, tmp_path):
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=['{"action_id": 1}'], record=record) as p:
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", atari_url, *model_flags(p)],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces_of(episodes)
    assert trace["errors"] == [] and trace["stop_condition"] == "openenv_done"
    assert trace["metrics"]["openenv_steps"] == 3
    # The last request holds the whole conversation.
    last = recorded_requests(record)[-1]
    turns = [m for m in last["messages"] if m["role"] == "user"]
    assert len(turns) == 3  # the reset and two steps; the third step ends it
    for step, message in enumerate(turns):
        text, images = parts(message)
        assert "screen: image 210x160x3, attached" in text
        (frame,) = images
        assert (frame.format, frame.size, frame.mode) == ("PNG", (160, 210), "RGB")
        assert frame.getpixel((5, 7)) == (40 * step % 256, 7, 5)
