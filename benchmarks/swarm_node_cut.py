"""A worker node of a multi-node Swarm cut off mid-run: what the run loses, with the
episodes it held resumed by replay and without.

    sudo uv run python benchmarks/swarm_node_cut.py [--episodes 192] [--in-flight 96]
        [--replicas 4] [--think 2.0] [--cut-after 48] [--legs resume,no-resume]
        [--timeout 900]

A swarm of a manager and two workers on this machine (`swarm_nodes.py`: each node a
`dockerd` in a network namespace of its own on a host bridge; this machine's engine
is left alone), with the local Wordle env's image (`benchmarks/swarm_wordle`, built
here first) loaded into every engine. Per leg, one `vf-eval` (verifiers 0.4, the
`.venv-vf04` environment) of `--episodes` Wordle games, `--in-flight` at once, on
`provider = "swarm"` through the manager (`DOCKER_HOST`): a service of `--replicas`
tasks in host mode, spread over the two workers (the manager is drained). The
local policy solves each game, waiting `--think` seconds before each reply. Once
`--cut-after` episodes have ended (default: a quarter), the first worker is cut off
(the host end of its veth down: no packet in or out, as a node lost to the
network), and stays cut until the eval ends; the `no-resume` leg runs with
`resume_lost_sessions = false`. Between legs the worker is reconnected.

Prints per leg: episodes ok / failed / resumed, mean seconds a resume took (the
fresh session and the replay: `info.openenv.resumes`), the mean "stall" of the
resumed episodes (the step their session was lost in, from its sending to its
answer: noticing the loss, then the resume), the mean reward of the ok ones, wall
time, when the cut fell, and the most common errors.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from leg_processes import free_port, served
from swarm import IMAGE, build_image
from swarm_nodes import (
    PREFIX,
    cut_off,
    node_docker,
    reconnect,
    swarm_nodes,
    wait_ready,
)

ROOT = Path(__file__).resolve().parent.parent
WORKERS = ["w1", "w2"]
CUT = WORKERS[0]


@dataclass
class Leg:
    name: str
    episodes: int = 0
    ok: int = 0
    failed: int = 0
    resumed: int = 0
    resume_s: list[float] = field(default_factory=list)
    stall_s: list[float] = field(default_factory=list)
    """Per resumed episode, its longest step: the one its session was lost in
    (noticing the loss, then the resume)."""
    rewards: list[float] = field(default_factory=list)
    wall_s: float = 0.0
    cut_at_s: float | None = None
    errors: dict[str, int] = field(default_factory=dict)


def eval_args(args: argparse.Namespace, policy: str, resume: bool) -> list[str]:
    kwargs = {"image": IMAGE, "publish": "host", "replicas": args.replicas}
    resets = [{"seed": i} for i in range(args.episodes)]
    return [
        *("openenv-v1", "--env.taskset.env", "local/wordle"),
        *("--env.taskset.resets", json.dumps(resets)),
        *("--env.taskset.provider", "swarm"),
        *("--env.taskset.provider-kwargs", json.dumps(kwargs)),
        *("--env.taskset.launch-timeout-s", "300"),
        *("--env.taskset.resume-lost-sessions", str(resume).lower()),
        *("-n", str(args.episodes), "-r", "1", "-c", str(args.in_flight)),
        *("-m", "local-policy", "--client.base-url", policy),
        *("--client.api-key-var", "LOCAL_POLICY_KEY"),
    ]


def episodes_done(workdir: Path) -> int:
    """Episodes the eval has written to its traces so far."""
    return sum(
        sum(1 for line in path.read_text().splitlines() if line.strip())
        for path in workdir.glob("outputs/**/traces.jsonl")
    )


def cut_when_under_way(
    proc: subprocess.Popen, workdir: Path, at: int, started: float, leg: Leg
) -> None:
    """Cut `CUT` off once `at` episodes have ended (the servers serve, the next
    episodes are in flight); not after the eval ends."""
    while proc.poll() is None:
        if episodes_done(workdir) >= at:
            cut_off(CUT)
            leg.cut_at_s = time.monotonic() - started
            print(f"  cut {CUT} off at {leg.cut_at_s:.1f}s", flush=True)
            return
        time.sleep(0.25)


def run_leg(
    name: str, argv: list[str], environ: dict[str, str], args: argparse.Namespace
) -> Leg:
    leg = Leg(name)
    workdir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-{name}-"))
    started = time.monotonic()
    with (workdir / "stderr.txt").open("w") as err:
        proc = subprocess.Popen(
            argv, cwd=workdir, env=environ, stdout=subprocess.DEVNULL, stderr=err
        )
    cutter = threading.Thread(
        target=cut_when_under_way,
        args=(proc, workdir, args.cut_after or args.episodes // 4, started, leg),
    )
    cutter.start()
    try:
        proc.wait(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        print(f"  {name}: eval still running after {args.timeout}s: stopped")
        proc.terminate()
        proc.wait(60)
    finally:
        cutter.join()
        leg.wall_s = time.monotonic() - started
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    read_traces(workdir, leg)
    if not leg.episodes:
        tail = (workdir / "stderr.txt").read_text()[-2000:]
        print(f"  {name}: no traces (exit {proc.returncode}):\n{tail}")
    return leg


def read_traces(workdir: Path, leg: Leg) -> None:
    for path in workdir.glob("outputs/**/traces.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                count(json.loads(line), leg)


def count(record: dict, leg: Leg) -> None:
    """One episode's record (verifiers 0.4: its errors, and its trace, whose
    `info.openenv` has the reward, the env's error and the resumes) into `leg`."""
    leg.episodes += 1
    infos = [(t.get("info") or {}).get("openenv") or {} for t in record["traces"]]
    resumes = [r for info in infos for r in info.get("resumes") or []]
    leg.resumed += bool(resumes)
    leg.resume_s += [r["seconds"] for r in resumes]
    if resumes:
        timing = record["traces"][0].get("info", {}).get("openenv_timing") or {}
        leg.stall_s.append(max(timing.get("step_s") or [0.0]))
    errors = [
        e.get("message", str(e)) if isinstance(e, dict) else str(e)
        for e in record.get("errors") or []
    ]
    errors += [info["error"] for info in infos if info.get("error")]
    if errors:
        leg.failed += 1
        key = errors[0][:160]
        leg.errors[key] = leg.errors.get(key, 0) + 1
    else:
        leg.ok += 1
        leg.rewards += [info.get("reward") or 0.0 for info in infos[:1]]


def report(legs: list[Leg]) -> None:
    print(
        f"\n{'leg':<10}{'episodes':>9}{'ok':>6}{'failed':>8}{'resumed':>9}"
        f"{'resume s':>10}{'stall s':>9}{'reward':>8}{'cut at s':>10}{'wall s':>8}"
    )
    for leg in legs:
        mean_resume = sum(leg.resume_s) / len(leg.resume_s) if leg.resume_s else 0
        stall = sum(leg.stall_s) / len(leg.stall_s) if leg.stall_s else 0
        reward = sum(leg.rewards) / len(leg.rewards) if leg.rewards else 0
        cut = f"{leg.cut_at_s:.1f}" if leg.cut_at_s is not None else "-"
        print(
            f"{leg.name:<10}{leg.episodes:>9}{leg.ok:>6}{leg.failed:>8}"
            f"{leg.resumed:>9}{mean_resume:>10.2f}{stall:>9.1f}{reward:>8.2f}{cut:>10}"
            f"{leg.wall_s:>8.1f}"
        )
    for leg in legs:
        for error, n in sorted(leg.errors.items(), key=lambda e: -e[1])[:4]:
            print(f"  {leg.name}: {n} x {error}")


def between_legs() -> None:
    """Reconnect the cut worker and wait until the swarm has it back, with none of
    the last leg's tasks left on it."""
    reconnect(CUT)
    wait_ready(len(WORKERS) + 1, timeout_s=180)
    deadline = time.monotonic() + 120
    while node_docker(CUT, "ps", "-q").stdout.split():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{CUT} still runs the last leg's containers")
        time.sleep(1)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=192)
    parser.add_argument("--in-flight", type=int, default=96)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--think", type=float, default=2.0)
    parser.add_argument(
        "--cut-after", type=int, default=0, help="episodes ended (default: 1/4)"
    )
    parser.add_argument("--legs", default="resume,no-resume")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--vf04-venv", type=Path, default=ROOT / ".venv-vf04")
    return parser.parse_args()


def main() -> None:
    args = parse()
    if os.geteuid() != 0:
        raise SystemExit("run as root: it makes namespaces, a bridge and engines")
    vf_eval = args.vf04_venv / "bin" / "vf-eval"
    if not vf_eval.exists():
        raise SystemExit(f"no {vf_eval}: sync the verifiers 0.4 environment first")
    print(f"building {IMAGE} on this machine's engine ...", flush=True)
    build_image()
    port = free_port()
    policy = f"http://127.0.0.1:{port}/v1"
    policy_cmd = [sys.executable, "-m", "openenv_v1.local_policy", "--mode", "slow"]
    policy_cmd += ["--delay", str(args.think), "--port", str(port)]
    legs: list[Leg] = []
    print("starting the swarm: a manager and workers", WORKERS, flush=True)
    with (
        swarm_nodes(WORKERS, [IMAGE]) as manager,
        served(policy_cmd, f"{policy}/models"),
    ):
        for n, name in enumerate(args.legs.split(",")):
            if n:
                between_legs()
            environ = {**os.environ, "DOCKER_HOST": manager}
            environ |= {"OPENENV_V1_DOCKER": "/usr/bin/docker"}
            environ |= {"LOCAL_POLICY_KEY": "local", "OPENENV_V1_RUN_ID": f"nc-{name}"}
            argv = [str(vf_eval), *eval_args(args, policy, name == "resume")]
            print(
                f"running {name}: {args.episodes} episodes, {args.in_flight} in flight"
            )
            legs.append(run_leg(name, argv, environ, args))
    report(legs)


if __name__ == "__main__":
    main()
