"""How fast this machine runs plain Python right now: the yardstick for CI's figures.

    python3 benchmarks/machine_speed.py

Times a fixed single-threaded workload (building dicts, JSON in and out, sorting
strings: what the suites' processes spend most of their CPU on) three times and
prints the fastest. The test suites are CPU-bound on 2 cores, so their wall time
follows how fast the machine is, and this VM's speed has varied by 2x from one day
to the next (docs/testing.md). `.ci/run` prints the figure before and after the
suites, so one run's figures can be set against another's.

Standard library only; runs on any Python >= 3.11.
"""

from __future__ import annotations

import json
import time

ROUNDS = 3
ITEMS = 100_000


def workload() -> int:
    """The fixed work; returns a checksum so nothing is optimized away."""
    table = {
        f"key-{i}": {"n": i, "pair": [i, i * 2], "tag": "x" * (i % 7)}
        for i in range(ITEMS)
    }
    text = json.dumps(table)
    back = json.loads(text)
    keys = sorted(back, key=lambda k: k[::-1])
    return len(text) + len(keys) + back[keys[0]]["n"]


def best_of(rounds: int = ROUNDS) -> float:
    """The fastest of `rounds` runs of `workload()`, in seconds."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        workload()
        times.append(time.perf_counter() - started)
    return min(times)


if __name__ == "__main__":
    print(
        f"machine speed: {best_of():.2f} s (benchmarks/machine_speed.py; lower is faster)"
    )
