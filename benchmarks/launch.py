"""Benchmark: how fast a launched env server is ready, first time and repeated.

    uv run python benchmarks/launch.py [--repeats 3]

Launches the local Wordle env (`envs/wordle`) from its folder and times `start()` to
the first `/health` 200, in one run, two ways:

- `ours`: `SupervisedUVProvider` as a rollout uses it (app chosen from the project,
  the project's prepared environment, gradio hidden). "first" is a launch with an
  empty prepared-environment cache (a fresh `OPENENV_V1_CACHE_DIR`, so the env is
  created and installed from uv's package cache); "repeated" are the launches after
  it, which reuse that environment.
- `openenv`: OpenEnv's own `UVProvider` (`uv run --isolated`, a new environment per
  launch), with the same app, host and port choice. Its readiness poll sleeps 0.5 s
  between tries, which is part of what a user of it waits.

Each launch is stopped before the next; the median of the repeated launches is
reported beside the first.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_v1.core.launch.uv import SupervisedUVProvider  # noqa: E402
from openenv_v1.core.launch.uv_prepared import CACHE_DIR_VAR  # noqa: E402
from openenv_v1.core.light_import import without_gradio  # noqa: E402

with without_gradio():
    from openenv.core.containers.runtime.uv_provider import UVProvider

WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"


def time_launch(make: Callable[[], object]) -> float:
    """Seconds from `start()` to ready; the server is stopped afterwards."""
    provider = make()
    started = time.monotonic()
    try:
        provider.start()
        provider.wait_for_ready(300)
        return time.monotonic() - started
    finally:
        provider.stop()


def ours() -> SupervisedUVProvider:
    return SupervisedUVProvider(project_path=str(WORDLE_PROJECT), host="127.0.0.1")


def openenv() -> UVProvider:
    return UVProvider(
        project_path=str(WORDLE_PROJECT), app=WORDLE_APP, host="127.0.0.1"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="openenv-v1-bench-") as cache:
        os.environ[CACHE_DIR_VAR] = cache
        for name, make in (("ours", ours), ("openenv UVProvider", openenv)):
            first = time_launch(make)
            repeated = [time_launch(make) for _ in range(args.repeats)]
            rows.append((name, first, repeated))
    uv = subprocess.run(["uv", "--version"], capture_output=True, text=True).stdout
    print(
        f"\nLaunch of the local Wordle env to /health 200 ({platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {uv.strip()})\n"
    )
    print("| launcher | first s | repeated s (median) | repeated runs s |")
    print("|---|---:|---:|---|")
    for name, first, repeated in rows:
        runs = ", ".join(f"{r:.2f}" for r in repeated)
        print(f"| {name} | {first:.2f} | {statistics.median(repeated):.2f} | {runs} |")
    (_, _, ours_runs), (_, _, theirs_runs) = rows
    ratio = statistics.median(theirs_runs) / statistics.median(ours_runs)
    print(f"\nrepeated launch: OpenEnv's UVProvider / ours = {ratio:.2f}x")


if __name__ == "__main__":
    main()
