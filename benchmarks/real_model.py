"""Benchmark: a real small LLM plays Wordle through this taskset and through verifiers'
built-in `openenv` taskset, on both verifiers lines, same model and seeds.

    python3 -m tests.real_llm install            # once: the model and llama-server
    uv run python benchmarks/real_model.py [--episodes 4] [--max-turns 6]

The model is SmolLM2-135M-Instruct (Q4_1) served by llama.cpp on 127.0.0.1
(`tests/real_llm.py`), one slot, so episodes run one at a time (`-c 1`). The env is
the local Wordle env (`envs/wordle`), launched with UV from its folder by each eval.
Legs:

- `ours`: `eval openenv-v1` (verifiers 0.2, the package's harness);
- `upstream`: verifiers 0.2's built-in `openenv` taskset, `--harness.id null`;
- `vf04`: `vf-eval openenv-v1` (verifiers 0.4, the package's chat harness);
- `vf04-builtin`: verifiers 0.4's built-in `openenv` taskset (`null` harness on the
  local runtime), with `benchmarks/vf04_builtin_shim` (it reads an attribute
  openenv-core 0.3.0 does not have);
- `floor`: verifiers 0.2 with the package's harness and a user simulator that has no
  env at all (`benchmarks/openenv_v1_floor.py`, served as ours is): its time between
  model calls is verifiers' own hop to a user simulator, which `ours` pays too.

For each: episodes solved (reward >= 1), episodes that ended with an error, model
turns, invalid actions per turn (ours: replies the adapter refused and answered
with feedback; the built-ins have no such notion: a reply the env refuses fails the
rollout, one it takes is stepped as is), and seconds per turn: the model call's own
time (from the trace) and the eval's wall time over all its turns.

For this taskset's legs (`ours`, `vf04`) also the adapter's share of a turn: from a
model reply received to the next model request sent (the trace's call spans), less
the env's steps answered in between (`info.openenv_timing.step_end` and `step_s`),
per turn, beside the model's own time per turn and as a ratio of it. It holds all
that is neither the model nor the env: the reply read as an action, the next turn
rendered, and the framework's own hops (on 0.2 verifiers' MCP call to the user
simulator and back; docs/real-models.md says where that time goes). With the `floor`
leg in the run, the two are printed side by side: ours' time between calls, env steps
left out, against verifiers' own hop with no env behind it. The header gives
the load average before and after the legs: wall figures move with it. The 0.4 legs run
in a second environment of this project (`.venv-vf04`, synced from `uv.lock` with
`--extra vf04` when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.real_llm import MODEL_NAME, installed, llama_server  # noqa: E402

WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"
VF04_VENV = ROOT / ".venv-vf04"
FLOOR = "openenv-v1-floor"


@dataclass
class Leg:
    name: str
    episodes: int = 0
    solved: int = 0
    errored: int = 0
    turns: int = 0
    invalid: int | None = 0
    model_s: float = 0.0
    wall_s: float = 0.0
    between_s: float | None = None
    """The adapter's share: reply received to next request sent, less env steps."""
    gaps: int = 0

    def row(self) -> str:
        invalid = (
            "n/a"
            if self.invalid is None
            else f"{self.invalid / max(1, self.turns):.2f}"
        )
        per_model = self.model_s / max(1, self.turns)
        per_wall = self.wall_s / max(1, self.turns)
        if self.between_s is None or not self.gaps:
            share = "n/a | n/a"
        else:
            per_gap = self.between_s / self.gaps
            share = f"{per_gap * 1000:.1f} | {per_gap / max(per_model, 1e-9):.2%}"
        return (
            f"| {self.name} | {self.solved}/{self.episodes} | {self.errored}/{self.episodes} "
            f"| {self.turns} | {invalid} | {per_model:.2f} | {per_wall:.2f} | {share} |"
        )


def between_turns(trace: dict, no_env: bool = False) -> tuple[float, int] | None:
    """The adapter's time between the model calls of one trace, summed, and how many
    gaps it covers: each gap from a call's end to the next call's start, less the
    env steps answered inside it (`openenv_timing`: `step_end`, the wall time each
    step's answer arrived, and `step_s`, how long it took). None without timings,
    unless `no_env` (the floor: no steps to take out)."""
    timing = (trace.get("info") or {}).get("openenv_timing") or {}
    ends, durations = timing.get("step_end"), timing.get("step_s")
    if no_env:
        ends, durations = [], []
    if ends is None or durations is None:
        return None
    spans = [c.get("time") or {} for c in trace.get("calls") or ()]
    spans = sorted(
        (s["start"], s["end"]) for s in spans if s.get("start") and s.get("end")
    )
    total = 0.0
    for (_, reply_at), (next_at, _) in zip(spans, spans[1:], strict=False):
        stepping = sum(
            d
            for end, d in zip(ends, durations, strict=False)
            if reply_at < end <= next_at
        )
        total += max(0.0, next_at - reply_at - stepping)
    return total, max(0, len(spans) - 1)


def config_text(taskset: str, seeds: list[int], vf04: bool) -> str:
    if taskset == FLOOR:
        return f'[taskset]\nid = "{FLOOR}"\nepisodes = {len(seeds)}\n'
    resets = ", ".join(f"{{ seed = {s} }}" for s in seeds)
    section = "env.taskset" if vf04 else "taskset"
    kwargs = (
        f"{section}.provider_kwargs" if vf04 else "taskset.task.user.provider_kwargs"
    )
    return (
        f'[{section}]\nid = "{taskset}"\nenv = "local/wordle"\nresets = [{resets}]\n\n'
        f'[{kwargs}]\nproject_path = "{WORDLE_PROJECT}"\napp = "{WORDLE_APP}"\n'
    )


def run_leg(name: str, url: str, seeds: list[int], max_turns: int) -> Leg:
    vf04 = name.startswith("vf04")
    builtin = name in ("upstream", "vf04-builtin")
    floor = name == "floor"
    taskset = "openenv" if builtin else FLOOR if floor else "openenv-v1"
    cwd = Path(tempfile.mkdtemp(prefix=f"openenv-v1-real-{name}-"))
    (cwd / "eval.toml").write_text(config_text(taskset, seeds, vf04))
    env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    model = ["-m", MODEL_NAME, "--client.base-url", url]
    model += ["--client.api-key-var", "LOCAL_POLICY_KEY", "-c", "1", "--no-push"]
    if vf04:
        env["UV_PROJECT_ENVIRONMENT"] = str(VF04_VENV)
        cmd = [str(VF04_VENV / "bin" / "vf-eval"), "@", "eval.toml", *model]
        cmd += ["--env.player.max-turns", str(max_turns)]
        if builtin:
            cmd += ["--env.player.harness.id", "null"]
            cmd += ["--env.player.runtime.type", "subprocess"]
            env["PYTHONPATH"] = str(ROOT / "benchmarks" / "vf04_builtin_shim")
        else:
            cmd += ["--env.taskset.max-invalid-actions", str(max_turns + 1)]
    else:
        cmd = [str(ROOT / ".venv" / "bin" / "eval"), "@", "eval.toml", *model]
        cmd += ["--max-turns", str(max_turns), "--no-rich"]
        if builtin:
            cmd += ["--harness.id", "null"]
        elif floor:
            # Played by the package's harness, as `ours` is (its id has none).
            cmd += ["--harness.id", "openenv-v1"]
            env["PYTHONPATH"] = str(ROOT / "benchmarks")
        else:
            cmd += ["--taskset.task.user.max-invalid-actions", str(max_turns + 1)]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    leg = Leg(name, wall_s=time.monotonic() - started)
    if proc.returncode != 0:
        print(f"{name}: exit {proc.returncode}\n{proc.stderr[-2000:]}", file=sys.stderr)
    leg.invalid = None if builtin or floor else 0
    for trace in read_traces(cwd, vf04):
        leg.episodes += 1
        leg.errored += bool(trace["errors"])
        reward = trace["rewards"].get("openenv_reward", 0.0)
        reward = reward["score"] if isinstance(reward, dict) else reward
        leg.solved += (reward or 0.0) >= 1.0
        leg.turns += sum(
            1 for n in trace["nodes"] if n["message"]["role"] == "assistant"
        )
        if leg.invalid is not None:
            leg.invalid += int(trace["metrics"].get("openenv_invalid_action_count", 0))
        for call in trace.get("calls") or []:
            span = call.get("time") or {}
            if span.get("end") and span.get("start"):
                leg.model_s += span["end"] - span["start"]
        between = between_turns(trace, no_env=floor)
        if not builtin and between is not None:
            leg.between_s = (leg.between_s or 0.0) + between[0]
            leg.gaps += between[1]
    return leg


def read_traces(cwd: Path, vf04: bool) -> list[dict]:
    traces = []
    pattern = "outputs/*/traces.jsonl" if vf04 else "outputs/*/*/traces.jsonl"
    for path in sorted(cwd.glob(pattern)):
        for line in path.read_text().splitlines():
            if line:
                record = json.loads(line)
                traces += record["traces"] if vf04 else [record]
    return traces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--only", default="ours,floor,upstream,vf04,vf04-builtin")
    parser.add_argument("--threads", type=int, default=1, help="llama-server -t")
    args = parser.parse_args()
    if not installed():
        sys.exit("the model is not installed: run `python3 -m tests.real_llm install`")
    names = args.only.split(",")
    if any(n.startswith("vf04") for n in names) and not (VF04_VENV / "bin").is_dir():
        subprocess.run(
            ["uv", "sync", "--locked", "--extra", "vf04", "--no-group", "vf02"],
            cwd=ROOT,
            env={**os.environ, "UV_PROJECT_ENVIRONMENT": str(VF04_VENV)},
            check=True,
        )
    seeds = list(range(args.episodes))
    legs = []
    load_before = os.getloadavg()
    with llama_server(threads=args.threads) as url:
        for name in names:
            legs.append(run_leg(name, url, seeds, args.max_turns))
            print(f"{name}: done in {legs[-1].wall_s:.0f} s", file=sys.stderr)
    print(
        f"\n{MODEL_NAME} (Q4_1, llama.cpp, 1 slot), Wordle seeds {seeds}, "
        f"max {args.max_turns} turns, -c 1; load average (1, 5, 15 min) "
        f"{_loads(load_before)} before, {_loads(os.getloadavg())} after, "
        f"on {os.cpu_count()} cores\n"
    )
    print(
        "| leg | solved | errored | turns | invalid / turn | model s / turn "
        "| wall s / turn | adapter ms / turn | adapter / model |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for leg in legs:
        print(leg.row())
    by_name = {leg.name: leg for leg in legs}
    if {"ours", "floor"} <= by_name.keys():
        ours, floor = by_name["ours"], by_name["floor"]
        if ours.gaps and floor.gaps and ours.between_s is not None:
            hop = (floor.between_s or 0.0) / floor.gaps
            print(
                f"\nverifiers 0.2's own hop to a user simulator with no env (floor): "
                f"{hop * 1000:.1f} ms a turn; ours, env steps left out: "
                f"{ours.between_s / ours.gaps * 1000:.1f} ms a turn (two legs run one "
                "after the other: compare under the same load)"
            )


def _loads(loads: tuple[float, float, float]) -> str:
    return "/".join(f"{load:.1f}" for load in loads)


if __name__ == "__main__":
    main()
