"""Vision envs through a real `eval`: what the policy is sent, request by request.

The policy records every request body; each user turn in them is checked: one PNG per
image observation that decodes to the frame's size and pixels, a short text line
naming the field, text within `max_observation_chars`, and notes where text was cut
or images left out.
"""

import base64
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.servers import (
    NULL_HARNESS,
    TEST_ENVS,
    model_flags,
    policy_server,
    recorded_requests,
    run_cli,
    run_eval,
    uvicorn_server,
)

# One pytest-xdist worker runs this file: its module-scoped env servers start once,
# not once in each worker that gets one of its tests (each start is ~5 s of CPU).
pytestmark = pytest.mark.xdist_group("image_evals")


@pytest.fixture(scope="module")
def atari_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:atari_app", app_dir=TEST_ENVS) as url:
        yield url


@pytest.fixture(scope="module")
def browser_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:browser_app", app_dir=TEST_ENVS) as url:
        yield url


@pytest.fixture(scope="module")
def png_url() -> Iterator[str]:
    with uvicorn_server("pixel_envs:png_app", app_dir=TEST_ENVS) as url:
        yield url


def eval_recording(
    url: str, reply: str, tmp_path: Path, *flags: str
) -> tuple[list[dict], list[dict]]:
    """Run an eval against `url` with a policy that always sends `reply`; returns the
    traces and, per rollout, the user turns of its last model request. The package's
    default harness sends them, unless `flags` name another (the Atari-like frames
    go through verifiers' `null` harness too)."""
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=[reply], record=record) as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", url, *flags] + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
    requests = recorded_requests(record)
    assert requests
    # Each rollout's last request holds its whole conversation; earlier ones are its
    # prefixes.
    last = [
        r
        for r in requests
        if not any(
            other is not r and other["messages"][: len(r["messages"])] == r["messages"]
            for other in requests
        )
    ]
    return traces, [[m for m in r["messages"] if m["role"] == "user"] for r in last]


def parts(message: dict) -> tuple[str, list[Image.Image]]:
    """(the text, the decoded images) of a user message."""
    content = message["content"]
    if isinstance(content, str):
        return content, []
    text = "\n".join(p["text"] for p in content if p["type"] == "text")
    images = []
    for part in content:
        if part["type"] == "image_url":
            header, _, data = part["image_url"]["url"].partition(",")
            assert header in ("data:image/png;base64",), header
            images.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return text, images


def test_atari_like_frames_go_as_one_png_per_observation(atari_url, tmp_path):
    traces, conversations = eval_recording(
        atari_url,
        '{"action_id": 1}',
        tmp_path,
        "--taskset.resets",
        '[{}, {"obs_type": "ram"}]',
        *NULL_HARNESS,
    )
    assert sorted(t["metrics"]["openenv_steps"] for t in traces) == [3, 3]
    rgb = [c for c in conversations if "image 210x160x3" in parts(c[0])[0]]
    ram = [c for c in conversations if "screen_shape: [128]" in parts(c[0])[0]]
    assert len(rgb) == len(ram) == 1
    (turns,) = rgb
    assert len(turns) == 3  # the reset and two steps; the third step ends it
    for step, message in enumerate(turns):
        text, images = parts(message)
        assert "screen: image 210x160x3, attached" in text
        assert "screen_shape" not in text and "[0,0,0" not in text
        assert len(text) < 2_000
        (frame,) = images
        assert (frame.format, frame.size, frame.mode) == ("PNG", (160, 210), "RGB")
        assert frame.getpixel((5, 7)) == (40 * step % 256, 7, 5)
        assert (text.count("Action schema:"), step) in ((1, 0), (0, step))
    # RAM is no image: 128 values stay text, and nothing is attached.
    for message in ram[0]:
        text, images = parts(message)
        assert images == [] and "screen: [" in text and "image" not in text


def test_images_off_leaves_one_line_notes_within_the_bound(atari_url, tmp_path):
    traces, (turns,) = eval_recording(
        atari_url,
        '{"action_id": 2}',
        tmp_path,
        "--taskset.task.user.observation-images",
        "false",
    )
    assert traces[0]["rewards"]["openenv_reward"] == 3.0
    for message in turns:
        assert isinstance(message["content"], str)
        assert "screen: image 210x160x3, not shown" in message["content"]
        assert len(message["content"]) < 2_000


@pytest.mark.parametrize("images", [True, False], ids=["images", "no-images"])
def test_browser_like_screenshot_is_an_image_and_long_texts_are_cut(
    images, browser_url, tmp_path
):
    bound = 3_000
    _, (turns,) = eval_recording(
        browser_url,
        '{"action_str": "click(\'12\')"}',
        tmp_path,
        "--taskset.task.user.max-observation-chars",
        str(bound),
        "--taskset.task.user.observation-images",
        str(images).lower(),
    )
    assert len(turns) == 2
    for step, message in enumerate(turns):
        text, shots = parts(message)
        assert len(text) <= bound
        assert "goal: Buy a red shirt in size M." in text
        for field in ("pruned_html", "axtree_txt"):
            assert f"chars of {field} cut ...]" in text
        if not images:
            assert "screenshot: image 96x128x3, not shown" in text and shots == []
            continue
        assert "screenshot: image 96x128x3, attached" in text
        (shot,) = shots
        assert shot.size == (128, 96)
        assert shot.getpixel((9, 4)) == (9, 4, 50 * step % 256)


def test_a_base64_png_string_is_sent_as_that_image(png_url, tmp_path):
    _, (turns,) = eval_recording(png_url, '{"answer": "blue"}', tmp_path)
    assert len(turns) == 2
    for step, message in enumerate(turns):
        text, images = parts(message)
        assert "image: image 48x64x3, attached" in text
        assert f"Picture {step}." in text
        (picture,) = images
        assert picture.size == (64, 48)
        assert picture.getpixel((3, 3)) == (30 * step, 100, 200)


def test_check_reports_the_text_length_images_and_cuts_the_model_gets(
    atari_url, browser_url
):
    proc = run_cli("check", "--base-url", atari_url, "--action", '{"action_id": 0}')
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    gets = [line.strip() for line in out.splitlines() if "the model gets:" in line]
    assert len(gets) == 2  # the reset and the step
    for line in gets:
        assert re.fullmatch(
            r"the model gets: [\d,]+ chars of text \+ 1 image: "
            r"screen 210x160x3 \(image/png, [\d,]+ bytes\)",
            line,
        ), line

    proc = run_cli(
        "check",
        "--base-url",
        browser_url,
        "--no-observation-images",
        "--max-observation-chars",
        "2500",
        "--probe-sessions",
        "0",
        "--json",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    gets = json.loads(proc.stdout)["reset"]["model_gets"]
    assert gets["text_chars"] <= 2_500
    assert gets["images"] == []
    assert gets["omitted_images"] == [{"field": "screenshot", "shape": "96x128x3"}]
    assert sorted(c["field"] for c in gets["cuts"]) == ["axtree_txt", "pruned_html"]
