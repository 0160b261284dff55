"""Benchmark: the per-step cost of image observations (an Atari-like env).

    uv run python benchmarks/pixels.py [--steps 300]

1. Turn cost alone: `TurnRenderer.observation` on a 210x160x3 frame sent as a flat int
   list plus `screen_shape` (finding the image, PNG encoding, the text) and the data URL
   the user message carries, for a Breakout-like frame and for a frame of noise (PNG's
   worst case); and a BrowserGym-size 720x1280x3 screenshot as a nested list. Median
   ms per step.
2. A whole step on a served Atari-like env (`tests/envs/pixel_envs.py`, 127.0.0.1): a
   raw `GenericEnvClient.step` against our `EnvEpisode.act` (parse, step, image,
   render) and the client step inside it. Median ms per step.
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from leg_processes import free_port, served  # noqa: E402
from step_cost import timed_sessions  # noqa: E402

H, W = 210, 160


def breakout_frame(step: int) -> list[int]:
    """Black field, six rows of coloured bricks, a score, a paddle and a ball."""
    rows = [[(0, 0, 0)] * W for _ in range(H)]
    colours = [(200, 72, 72), (198, 108, 58), (180, 122, 48), (162, 162, 42)]
    colours += [(72, 160, 72), (66, 72, 200)]
    for band, colour in enumerate(colours):
        for y in range(57 + 6 * band, 63 + 6 * band):
            rows[y][8:152] = [colour] * 144
    for y in range(5, 15):  # score digits
        for x in range(36, 36 + 12 * (step % 4 + 1)):
            if (x // 3 + y // 2) % 3:
                rows[y][x] = (142, 142, 142)
    for y in range(189, 193):  # paddle
        left = 20 + step * 3 % 120
        rows[y][left : left + 16] = [(200, 72, 72)] * 16
    ball_x, ball_y = 20 + step * 5 % 120, 100 + step * 3 % 80
    for y in range(ball_y, ball_y + 4):
        rows[y][ball_x : ball_x + 2] = [(200, 72, 72)] * 2
    return [v for row in rows for pixel in row for v in pixel]


def noise_frame(step: int) -> list[int]:
    rng = random.Random(step)
    return [rng.randrange(256) for _ in range(H * W * 3)]


def atari_observation(step: int, frame: list[int]) -> dict:
    return {
        "screen": frame,
        "screen_shape": [H, W, 3],
        "legal_actions": [0, 1, 2, 3],
        "lives": 5,
        "episode_frame_number": step * 4,
    }


def browser_observation(step: int) -> dict:
    shot = [
        [[x // 40 * 30 % 256, y // 30 * 20 % 256, step % 256] for x in range(1280)]
        for y in range(720)
    ]
    return {"goal": "Buy a red shirt.", "screenshot": shot}


def turn_cost(observations: list[dict]) -> tuple[float, int, int]:
    """Median ms per step of everything the user does with one observation after the
    client returns it, the median PNG size, and the text length."""
    from openenv_v1.core.episode.turns import TurnRenderer

    turns = TurnRenderer()
    times, sizes = [], []
    text_chars = 0
    for observation in observations:
        started = time.perf_counter()
        turn = turns.observation(observation)
        urls = [image.data_url() for image in turn.images]
        times.append(time.perf_counter() - started)
        sizes.append(len(turn.images[0].encoded()))
        text_chars = len(turn.text)
        assert len(urls) == 1
    return statistics.median(times) * 1e3, int(statistics.median(sizes)), text_chars


async def step_cost(url: str, steps: int) -> tuple[float, float, float]:
    """Median ms per step: a raw client step, our `act`, and the client step in it."""
    raw_times: list[float] = []
    ours_times: list[float] = []
    async with timed_sessions(url) as sessions:
        while len(ours_times) < steps:
            await sessions.raw.reset()
            for _ in range(3):
                started = time.perf_counter()
                await sessions.raw.step({"action_id": 1})
                raw_times.append(time.perf_counter() - started)
            episode = sessions.new_episode()
            await episode.reset({})
            while not episode.report.done:
                started = time.perf_counter()
                turn = await episode.act('{"action_id": 1}')
                [image.data_url() for image in turn.images]
                ours_times.append(time.perf_counter() - started)
        inner_times = sessions.inner_times
    return tuple(
        statistics.median(t) * 1e3 for t in (raw_times, ours_times, inner_times)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, Python {platform.python_version()}; "
        f"{args.steps} steps each"
    )
    import PIL  # imported before timing: a user process pays it once (~60 ms)

    print(f"Pillow {PIL.__version__}")
    for name, make in (("breakout-like", breakout_frame), ("noise", noise_frame)):
        frames = [atari_observation(i, make(i)) for i in range(args.steps)]
        ms, size, chars = turn_cost(frames)
        print(
            f"turn, {name} 210x160x3 frame: {ms:.2f} ms per step "
            f"(find + PNG encode + text + data URL); PNG {size:,} bytes, "
            f"text {chars} chars"
        )
    ms, size, _ = turn_cost([browser_observation(i) for i in range(5)])
    print(f"turn, 720x1280x3 nested screenshot: {ms:.1f} ms; PNG {size:,} bytes")

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = [sys.executable, "-m", "uvicorn", "pixel_envs:atari_app"]
    server += ["--app-dir", str(ROOT / "tests" / "envs"), "--port", str(port)]
    with served([*server, "--log-level", "warning"], f"{url}/health"):
        raw, ours, inner = asyncio.run(step_cost(url, args.steps))
    print(
        f"whole step on the served Atari-like env: raw client {raw:.2f} ms, our act "
        f"{ours:.2f} ms, the client step inside it {inner:.2f} ms: ours adds "
        f"{ours - inner:.2f} ms"
    )


if __name__ == "__main__":
    main()
