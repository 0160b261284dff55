"""Soak: model turns of many minutes keep their env session, on both verifiers lines
and every local launch mode.

    uv run python benchmarks/slow_turns.py --turn-s 600 --turns 2
    OPENENV_V1_DOCKER=/usr/bin/docker ...   # where `docker` wants buildx for BuildKit
    uv run python benchmarks/slow_turns.py --turn-s 60 --modes base_url,shared_uv

The local policy (`openenv_v1.local_policy --mode slow`) waits `--turn-s` seconds
before each Wordle guess; one eval per (line, mode) plays one local Wordle episode
of `--turns` model turns (`max_turns`), all side by side, so the whole soak takes
about `turns x turn_s`. Modes:

- `base_url`: a Wordle server run here (uvicorn, this project's environment);
- `shared_uv`: the taskset's shared UV-launched server (the pool's lease; on 0.2
  leased by the user simulator over the pool's endpoint, on 0.4 in process);
- `own_uv`: a UV launch per rollout (`shared_servers` off);
- `docker`: a container of an image built from a copy of `envs/wordle`, on this
  host's engine (`use_docker`, on 0.2 `docker_on_host`), shared.

For each it prints whether the episode kept its session (no error, every turn
stepped, `max_turns` reached), each turn's seconds as the trace shows them, and the
episode's wall time. The 0.4 evals run from `.venv-vf04` (sync it first with
`UV_PROJECT_ENVIRONMENT=.venv-vf04 uv sync --locked --extra vf04 --no-group vf02`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tests.servers import (  # noqa: E402
    WORDLE_APP,
    WORDLE_PROJECT,
    policy_server,
    uvicorn_server,
)

MODES = ("base_url", "shared_uv", "own_uv", "docker")
LINES = ("vf02", "vf04")


def launch_flags(
    line: str, mode: str, base_url: str, docker_folder: Path | None
) -> list[str]:
    """The taskset flags of one (line, mode)."""
    p = "--taskset." if line == "vf02" else "--env.taskset."
    kwargs_flag = (
        "--taskset.task.user.provider-kwargs"
        if line == "vf02"
        else p + "provider-kwargs"
    )
    if mode == "base_url":
        return [p + "base-url", base_url]
    if mode == "docker":
        assert docker_folder is not None
        flags = [p + "env", "local/wordle", p + "use-docker", "true"]
        flags += [kwargs_flag, json.dumps({"project_path": str(docker_folder)})]
        return flags + ([p + "docker-on-host", "true"] if line == "vf02" else [])
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    flags = [p + "env", "local/wordle", kwargs_flag, kwargs]
    return flags + ([p + "shared-servers", "false"] if mode == "own_uv" else [])


def run_one(
    line: str,
    mode: str,
    policy: str,
    base_url: str,
    docker_folder: Path | None,
    turns: int,
) -> dict:
    cwd = Path(tempfile.mkdtemp(prefix=f"openenv-v1-slow-{line}-{mode}-"))
    env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    model = ["-m", "local-policy", "--client.base-url", policy]
    model += ["--client.api-key-var", "LOCAL_POLICY_KEY", "--no-push"]
    p = "--taskset." if line == "vf02" else "--env.taskset."
    args = ["openenv-v1", *launch_flags(line, mode, base_url, docker_folder)]
    args += [p + "resets", '[{"seed": 3}]', *model]
    if line == "vf02":
        cmd = [str(ROOT / ".venv" / "bin" / "eval"), *args, "--no-rich"]
        cmd += ["--max-turns", str(turns)]
    else:
        env["UV_PROJECT_ENVIRONMENT"] = str(ROOT / ".venv-vf04")
        cmd = [str(ROOT / ".venv-vf04" / "bin" / "vf-eval"), *args]
        cmd += ["--env.player.max-turns", str(turns)]
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    traces = []
    for path in cwd.glob("outputs/**/traces.jsonl"):
        for raw in path.read_text().splitlines():
            record = json.loads(raw)
            traces += record.get("traces", [record]) if line == "vf04" else [record]
    result = {"line": line, "mode": mode, "exit": proc.returncode, "wall_s": wall}
    if len(traces) != 1:
        result["problem"] = f"{len(traces)} traces; stderr: {proc.stderr[-1500:]}"
        return result
    (trace,) = traces
    # Each model call's own span (nodes are stamped when a turn commits).
    turn_s = [round(c["time"]["end"] - c["time"]["start"], 1) for c in trace["calls"]]
    result.update(
        stop=trace["stop_condition"],
        errors=[e.get("message", "")[:300] for e in trace["errors"]],
        steps=int(trace["metrics"].get("openenv_steps", 0)),
        turn_s=turn_s,
    )
    result["kept"] = (
        not trace["errors"]
        and result["steps"] == turns
        and result["stop"] == "max_turns"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turn-s", type=float, default=600.0)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--lines", default=",".join(LINES))
    args = parser.parse_args()
    modes = args.modes.split(",")
    lines = args.lines.split(",")
    docker_folder = None
    if "docker" in modes:
        from docker_legs import wordle_image_folder

        from openenv_v1.core.launch.docker.image import ensure_env_image

        docker_folder = wordle_image_folder(
            Path(tempfile.mkdtemp(prefix="openenv-v1-slow-"))
        )
        built = ensure_env_image(docker_folder)
        print(f"image {built.image} ready in {built.seconds:.0f} s", file=sys.stderr)
    with (
        uvicorn_server(WORDLE_APP) as base_url,
        policy_server("slow", delay=args.turn_s) as policy,
        ThreadPoolExecutor(len(modes) * len(lines)) as pool,
    ):
        futures = [
            pool.submit(
                run_one, line, mode, policy, base_url, docker_folder, args.turns
            )
            for line in lines
            for mode in modes
        ]
        results = [f.result() for f in futures]
    print(
        f"\n{args.turns} model turns of {args.turn_s:.0f} s each, one Wordle episode per row\n"
    )
    print("| line | mode | kept the session | stop | steps | turn s | episode wall s |")
    print("|---|---|---|---|---:|---|---:|")
    for r in results:
        if "problem" in r:
            print(
                f"| {r['line']} | {r['mode']} | NO: {r['problem'][:200]} | | | | {r['wall_s']:.0f} |"
            )
            continue
        kept = "yes" if r["kept"] else f"NO: {'; '.join(r['errors']) or r['stop']}"
        print(
            f"| {r['line']} | {r['mode']} | {kept} | {r['stop']} | {r['steps']} "
            f"| {', '.join(map(str, r['turn_s']))} | {r['wall_s']:.0f} |"
        )
    sys.exit(0 if all(r.get("kept") for r in results) else 1)


if __name__ == "__main__":
    main()
