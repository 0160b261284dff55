"""Swarm next to shared UV servers: the same Wordle workload, in one run.

    uv run python benchmarks/swarm.py [--episodes 6] [--concurrency 6]
        [--replicas 2,4] [--big 0]

The local Wordle env (envs/wordle) is built into an image once
(`benchmarks/swarm_wordle/Dockerfile`, outside the timing), on the Docker engine this
host runs, which must be a swarm manager (`docker swarm init --advertise-addr
127.0.0.1` makes a one-node swarm). Then, on verifiers 0.2 (`eval openenv-v1`, the
local scripted policy, one seed per episode, as in benchmarks/run.py):

- `uv`: shared UV-launched servers (the default);
- `swarm-N`, for each N of `--replicas`: `provider = "swarm"`, a service of N tasks
  of that image published in host mode, each task a server of the pool.

With `--big K` (e.g. 256), the same legs run once more on verifiers 0.4 (`vf-eval`,
`--vf04-venv`), K episodes all in flight at once.

For each it prints the eval's wall time, mean setup (verifiers' `timing.setup`), time
per env step (verifiers 0.2's traces only), peak memory of the eval's process tree
(UV servers are in it, the containers are not), errors, and what was left behind 5 s after the eval: UV server processes, or
Swarm services, containers and networks of the leg's run label.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from leg_processes import free_port, served
from run import (
    ROOT,
    WORDLE_APP,
    WORDLE_PROJECT,
    Figures,
    run_eval,
    vf04_environment,
)

sys.path.insert(0, str(ROOT))
from tests import docker_engine

IMAGE = "openenv-v1/wordle-bench:latest"
DOCKERFILE = ROOT / "benchmarks" / "swarm_wordle" / "Dockerfile"
RUN_LABEL = "org.openenv-v1.run"


def build_image() -> None:
    docker_engine.docker(
        "build",
        "--network",
        "host",
        "-q",
        "-f",
        str(DOCKERFILE),
        "-t",
        IMAGE,
        str(WORDLE_PROJECT),
        timeout=900,
        env={**os.environ, "DOCKER_BUILDKIT": "1"},
    )


def swarm_left(run_id: str) -> int:
    """Services, containers and networks still labelled with `run_id`."""
    left = 0
    for ls in (("service", "ls", "-q"), ("ps", "-aq"), ("network", "ls", "-q")):
        result = docker_engine.docker(
            *ls, "--filter", f"label={RUN_LABEL}={run_id}", check=False
        )
        left += len(result.stdout.split())
    return left


def legs(
    episodes: int, concurrency: int, policy: str, replicas: list[int], line: str
) -> list[tuple[str, list[str], dict[str, str]]]:
    """(name, eval args, environment) per leg, on verifiers `line` (vf02 or vf04)."""
    prefix = "--taskset" if line == "vf02" else "--env.taskset"
    kwargs = (
        f"{prefix}.task.user.provider-kwargs"
        if line == "vf02"
        else ("--env.taskset.provider-kwargs")
    )
    common = ["-n", str(episodes), "-r", "1", "-c", str(concurrency)]
    common += ["-m", "local-policy", "--client.base-url", policy]
    common += ["--client.api-key-var", "LOCAL_POLICY_KEY"]
    resets = json.dumps([{"seed": i} for i in range(episodes)])
    base = ["openenv-v1", f"{prefix}.env", "local/wordle", f"{prefix}.resets", resets]
    uv = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    environ = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    out = [(f"{line}-uv", [*base, kwargs, uv, *common], environ)]
    for n in replicas:
        swarm = json.dumps({"image": IMAGE, "publish": "host", "replicas": n})
        run_id = f"bench-swarm-{line}-{n}-{os.getpid()}"
        out.append(
            (
                f"{line}-swarm-{n}",
                [*base, f"{prefix}.provider", "swarm", kwargs, swarm, *common],
                {**environ, "OPENENV_V1_RUN_ID": run_id},
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--replicas", default="2,4")
    parser.add_argument("--big", type=int, default=0, help="episodes all in flight")
    parser.add_argument(
        "--vf04-venv",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "openenv-v1"
        / "venv-vf04",
    )
    args = parser.parse_args()
    replicas = [int(n) for n in args.replicas.split(",") if n]
    os.environ.setdefault("OPENENV_V1_DOCKER", docker_engine.DOCKER)
    print(f"building {IMAGE} ...", flush=True)
    build_image()
    port = free_port()
    policy = f"http://127.0.0.1:{port}/v1"
    policy_cmd = [sys.executable, "-m", "openenv_v1.local_policy", "--mode", "solver"]
    runs = [("vf02", args.episodes, args.concurrency, None)]
    if args.big:
        print(f"syncing the verifiers 0.4 environment at {args.vf04_venv} ...")
        runs.append(
            ("vf04", args.big, args.big, [str(vf04_environment(args.vf04_venv))])
        )
    figures: list[tuple[Figures, int]] = []
    with served([*policy_cmd, "--port", str(port)], f"{policy}/models"):
        for line, episodes, concurrency, command in runs:
            for name, eval_args, environ in legs(
                episodes, concurrency, policy, replicas, line
            ):
                print(f"running {name} ({episodes} episodes, {concurrency} in flight)")
                figure = run_eval(name, eval_args, environ, None, command)
                run_id = environ.get("OPENENV_V1_RUN_ID")
                left = swarm_left(run_id) if run_id else figure.leftovers
                figures.append((figure, left))
    print(
        f"\n{'leg':<16}{'episodes':>9}{'wall s':>8}{'setup s':>9}{'ms/step':>9}"
        f"{'peak MB':>9}{'errors':>8}{'left':>6}"
    )
    for f, left in figures:
        print(
            f"{f.name:<16}{f.rollouts:>9}{f.wall_s:>8.1f}{f.setup_s:>9.1f}"
            f"{f'{f.step_ms:.0f}' if f.step_ms else '-':>9}{f.peak_mb:>9.0f}"
            f"{f.errors:>4}/{f.rollouts}{left:>6}"
        )
    for f, _ in figures:
        for message in f.error_kinds:
            print(f"  {f.name} error: {message}")


if __name__ == "__main__":
    main()
