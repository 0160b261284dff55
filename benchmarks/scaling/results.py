"""A leg's result, and what its traces say: episodes that ended well, step times,
the model's replies per seed (the raw leg replays them) and the user texts it was
shown (the floor leg shows them again)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from scaling.procs import Sample


@dataclass
class LegResult:
    leg: str
    level: int
    episodes: int
    ok: int
    wall_s: float
    step_s: list[float]
    peak_main_mb: float = 0.0
    peak_servers_mb: float = 0.0
    servers: int = 0
    left: int = 0
    errors: list[str] = field(default_factory=list)
    series: list[Sample] = field(default_factory=list)
    actions: dict[int, list[str]] = field(default_factory=dict)
    """The model's replies per reset seed (the raw leg replays them)."""
    shown: dict[int, list[str]] = field(default_factory=dict)
    """The user texts of each seed's episode, one a turn (the floor leg shows them)."""
    cpu_main_s: float = 0.0
    """CPU seconds of the leg's own processes (the eval's, the env server's)."""
    cpu_servers_s: float = 0.0
    """CPU seconds of its env servers."""
    load: float = 0.0
    """The machine's largest 1-minute load average during the leg."""
    peak_fds: int = 0
    """The most open files of the leg's processes and env servers at once."""


def check_traces(
    traces: list[dict], result: LegResult, stop: str = "openenv_done"
) -> None:
    """Count the episodes that ended well (no error, stop condition `stop`, and for
    an OpenEnv episode a reward equal to the env's account) and collect their step
    times."""
    floor = stop != "openenv_done"
    for trace in traces:
        errors = [e["message"][:160] for e in trace.get("errors") or []]
        account = (trace.get("info") or {}).get("openenv") or {}
        reward = (trace.get("rewards") or {}).get("openenv_reward")
        if isinstance(reward, dict):  # verifiers 0.4: {"score": ...}; 0.2: the value
            reward = reward.get("score")
        good = (
            not errors
            and trace.get("stop_condition") == stop
            and (floor or (reward is not None and reward == account.get("reward")))
        )
        result.ok += good
        if not good:
            result.errors.append(errors[0] if errors else trace.get("stop_condition"))
        timing = (trace.get("info") or {}).get("openenv_timing") or {}
        result.step_s += timing.get("step_s") or []
        seed = (((trace.get("task") or {}).get("data") or {}).get("reset") or {}).get(
            "seed"
        )
        if good and seed is not None:
            messages = [node.get("message") or {} for node in trace.get("nodes") or []]
            result.actions[seed] = [
                m["content"] for m in messages if m.get("role") == "assistant"
            ]
            result.shown[seed] = [
                m["content"]
                for m in messages
                if m.get("role") == "user" and isinstance(m.get("content"), str)
            ][: len(result.actions[seed])]


def read_jsonl(paths) -> list[dict]:
    return [
        json.loads(line)
        for path in paths
        for line in path.read_text().splitlines()
        if line
    ]


def count_lines(pattern: str, workdir: Path):
    def count() -> int:
        total = 0
        for path in workdir.glob(pattern):
            with contextlib.suppress(OSError):
                total += path.read_bytes().count(b"\n")
        return total

    return count


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
