"""Training scale: Wordle episodes at 64 to 512 in flight, five ways, in one run.

    uv run python benchmarks/scale.py [--levels 64,128,256,512] [--per-level 4]
        [--episodes N] [--legs raw,raw-paced,vf04,floor,vf04-server,vf02]
        [--vf02-max 512]

Each level runs `per-level x concurrency` episodes (2,048 at 512; `--episodes`: as
many at every level) of the local Wordle
env (envs/wordle), played by the local scripted policy (`openenv_v1.local_policy
--mode solver`), each with its own seed:

- `raw`: a bare OpenEnv `GenericEnvClient` per episode, on servers launched directly
  (as many as the `vf04` leg used at that level, each at the env's default session
  limit), guessing with the same solver in process, steps back to back: more load
  than an eval puts on the servers.
- `raw-paced`: the same bare client asking the same local policy for every move over
  HTTP, as an eval does: the env servers under an eval's rhythm, the baseline the
  `p99/raw` column divides by (the unpaced `raw` when it is the only one).
- `vf04`: `vf-eval openenv-v1` on verifiers 0.4 with its defaults: shared UV-launched
  servers, the package's chat harness, `-c` = the level.
- `floor`: `vf-eval` of a verifiers 0.4 env with no OpenEnv behind it
  (`benchmarks/openenv_v1_floor_vf04.py`), the same harness, showing the model the
  user texts the `vf04` leg's episode of the same seed showed, one a turn (the same
  model calls on the same conversations): the limit no adapter can beat. The
  `wall/floor` column divides the `vf04` and `vf04-server` legs' wall time by it.
- `vf04-server`: the trainer's path: verifiers 0.4's env server (`serve_env`, a broker
  over 2 worker processes) with `EnvClient.run` called for every task, `level` at once.
- `vf02`: `eval openenv-v1` on verifiers 0.2 (a user-simulator process per rollout) with
  its defaults and `-c` = the level, up to `--vf02-max`; one episode per slot
  (`--vf02-episodes`), as 0.2 runs about a quarter as fast.

The parts live in `benchmarks/scaling/` (one module per leg). The 0.4 legs run in a second environment of this project synced from `uv.lock`
(`--vf04-venv`, outside the timing). For each leg and level it prints episodes/s,
success (every trace ended on `openenv_done` with its reward equal to the env's
account, no error), p50/p99 wall time of one env step (the client's view: the traces'
`info["openenv_timing"]`, or the raw client's own clock), the peak memory of the
leg's processes and of its env servers, the servers used, and processes left behind.
Then what each leg cost: CPU seconds per episode of its own processes and of its env
servers, memory and open files per episode in flight, the largest load average it ran
under, and per level the additive limit `1 / (1/floor + 1/raw)` episodes/s with the
`vf04` leg's share of it.
Then the soak series of the largest level: every 100 episodes, memory, open files and
threads of the eval (or env-server) process and of the env servers.
Each eval leg's work folder (`openenv-scale-<leg>-*` in the temp dir, its log in
`stderr.txt`) is removed after it, unless `SCALE_KEEP=1` is set.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scaling.eval_legs import (
    eval_leg,
    floor_leg,
    vf02_command,
    vf04_command,
)
from scaling.procs import ROOT, free_port, policy
from scaling.raw_leg import raw_leg
from scaling.report import print_costs, print_series, print_table
from scaling.results import LegResult
from scaling.server_leg import serve, server_leg, trainer


def vf04_environment(venv: Path) -> Path:
    """This project's verifiers 0.4 environment at `venv`, synced from `uv.lock`;
    returns its bin directory."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    subprocess.run(
        ["uv", "sync", "--locked", "--extra", "vf04", "--no-group", "vf02", "-q"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return venv / "bin"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="64,128,256,512")
    parser.add_argument("--per-level", type=int, default=4)
    parser.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes of every level (default: --per-level x the level)",
    )
    parser.add_argument("--legs", default="raw,raw-paced,vf04,floor,vf04-server,vf02")
    parser.add_argument(
        "--vf02-max", type=int, default=512, help="the vf02 leg's largest level"
    )
    parser.add_argument(
        "--vf02-episodes",
        type=int,
        default=None,
        help="episodes of the vf02 leg per level (default: one per slot, the "
        "level itself; 0.2 runs about a quarter as fast as 0.4)",
    )
    parser.add_argument(
        "--vf02-flags",
        default="",
        help="more flags for the vf02 leg's eval, e.g. '--taskset.max-simulators 512'",
    )
    parser.add_argument(
        "--vf04-flags",
        default="",
        help="more flags for the vf04 and floor legs' vf-eval, e.g. '--no-rich' "
        "(no live dashboard, as a trainer runs)",
    )
    parser.add_argument(
        "--vf04-venv", type=Path, default=Path(tempfile.gettempdir()) / "venv-vf04"
    )
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trainer", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(*args.serve)
    if args.trainer:
        address, policy_url, level, taskset, out = args.trainer
        return trainer(address, policy_url, int(level), taskset, out)

    legs = args.legs.split(",")
    levels = [int(x) for x in args.levels.split(",")]
    vf04_bin = (
        vf04_environment(args.vf04_venv)
        if {"vf04", "floor", "vf04-server"} & set(legs)
        else None
    )
    vf04_flags = shlex.split(args.vf04_flags)
    results: list[LegResult] = []
    with policy(free_port(), Path(sys.executable)) as policy_url:
        for level in levels:
            episodes = args.episodes or args.per_level * level
            servers, replay, shown = 0, {}, {}
            for leg in legs:
                if leg == "vf04":
                    assert vf04_bin is not None
                    command = vf04_command(
                        vf04_bin, policy_url, level, episodes, vf04_flags
                    )
                    result = eval_leg(
                        leg, command, level, episodes, "outputs/*/traces.jsonl"
                    )
                    servers, replay = result.servers, result.actions
                    shown = result.shown
                elif leg == "floor":
                    assert vf04_bin is not None
                    result = floor_leg(
                        vf04_bin, policy_url, level, episodes, shown, vf04_flags
                    )
                elif leg == "vf04-server":
                    assert vf04_bin is not None
                    result = server_leg(vf04_bin, policy_url, level, episodes)
                elif leg == "vf02":
                    if level > args.vf02_max:
                        continue
                    count = args.vf02_episodes or level
                    config = Path(tempfile.mkdtemp()) / "wordle.toml"
                    command = vf02_command(
                        policy_url, level, count, config, shlex.split(args.vf02_flags)
                    )
                    result = eval_leg(
                        leg, command, level, count, "outputs/*/*/traces.jsonl"
                    )
                elif leg in ("raw", "raw-paced"):
                    continue  # after the eval legs, on as many servers as vf04 used
                else:
                    raise SystemExit(f"unknown leg {leg!r}")
                results.append(result)
                print(
                    f"  done: {leg} @ {level}: {result.ok}/{result.episodes} ok",
                    flush=True,
                )
            for leg, paced in (("raw", None), ("raw-paced", policy_url)):
                if leg in legs:
                    count = max(1, servers or level // 64)
                    result = raw_leg(level, episodes, count, replay, paced)
                    results.append(result)
                    print(
                        f"  done: {leg} @ {level}: {result.ok}/{episodes} ok",
                        flush=True,
                    )
    print(f"\n{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}\n")
    print_table(results)
    print_costs(results)
    for result in results:
        if result.level == max(levels) and result.series:
            print_series(result)
    print()
    print(
        "step: wall time of one env step as the client saw it (traces' "
        "info.openenv_timing; the raw client's own clock)"
    )


if __name__ == "__main__":
    main()
