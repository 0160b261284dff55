"""Benchmark: the same Wordle workload seven ways, in one run, side by side.

    uv run python benchmarks/run.py [--episodes 6] [--concurrency 6]

- `upstream`: verifiers' built-in `openenv` taskset (the design this project replaces),
  launching the local Wordle env per rollout with OpenEnv's UV provider, with
  verifiers' `null` harness;
- `ours`: `openenv-v1` with its defaults (shared UV-launched servers, the package's
  in-process harness);
- `native`: `ours` with `--taskset.tool-calls native` (the policy calls the `act`
  tool; the eval's one tool server forwards each call to the user simulator);
- `floor`: `openenv-v1-floor` (benchmarks/openenv_v1_floor.py), a user simulator with
  no environment at all, played by the same harness as `ours`: what verifiers alone
  costs per rollout;
- `ours-null`, `native-null` (only when named in `--only`): `ours` and `native` with
  `--harness.id null`, verifiers' chat program in a process per rollout;
- `vf04`: `openenv-v1` on verifiers 0.4 (`vf-eval`, flags only, shared UV-launched
  servers, the package's in-process chat harness);
- `vf04-native`: `vf04` with `--env.taskset.tool-calls native` (the chat harness
  steps each `act` call in process), and
- `docker-shared`, `docker-per-rollout` (only when named in `--only`): `ours` with the
  env in Docker containers on this host (`use_docker`, `docker_on_host`), shared
  through the pool (the default) or one per rollout, from an image built from a copy
  of `envs/wordle` with a Dockerfile (`benchmarks/docker_legs.py`); before them, the
  image's first build, its reuse, and one container's start are timed (`image`);
- `vf04-builtin`: verifiers 0.4's built-in `openenv` taskset (a UV launch per rollout,
  the `null` chat harness on the local runtime). It fails on openenv-core 0.3.0 (it
  reads `client._base_url`), so it runs with `benchmarks/vf04_builtin_shim`; its chat
  program streams, so its policy is `benchmarks/streaming_policy.py` (the same
  replies).

The first four (and the two `-null` legs) run in this (verifiers 0.2) environment; the three 0.4 legs in a
second environment of this project, synced once from the same `uv.lock` with
`--extra vf04` (`--vf04-venv`, outside the timing).

All use the same local scripted policy, episodes, seeds and concurrency. For each it
prints the eval's wall time, mean per-rollout setup (verifiers' `timing.setup`; on
0.4 the env's launch happens in its `run()`, outside it), characters per episode (user
turns, and everything the model was sent over all its calls), the peak memory of the
eval's whole process tree, env server processes left 5 s after the eval (`left`, then
killed), and generation time per env step
(verifiers' `timing.generation` over the episode's steps: model calls, user turns,
tool calls), and the ratios. Then the
per-step cost of our user (`EnvEpisode.act`: parse, validate, step, render) against a
raw `GenericEnvClient.step` on one directly served Wordle server, and (`simulator`)
what one verifiers 0.2 user simulator costs to start, as shipped and with every
module imported (`benchmarks/simulator_start.py`: CPU and wall to its port and to
ready, its memory).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from docker_legs import (
    containers_left,
    docker_config,
    image_figures,
    run_label,
    wordle_image_folder,
)
from leg_processes import env_server_pids, free_port, served, tree_rss_mb
from simulator_start import measure_starts
from simulator_start import report as simulator_report
from step_cost import step_overhead

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"


@dataclass
class Figures:
    name: str
    wall_s: float
    rollouts: int
    errors: int
    setup_s: float
    user_chars: float
    prompt_chars: float
    peak_mb: float
    step_ms: float
    error_kinds: tuple[str, ...] = ()
    """Distinct error messages (their first 160 characters)."""
    leftovers: int = 0
    """Env server processes (or containers) still alive 5 s after the eval ended (then
    killed)."""


def run_eval(
    name: str,
    args: list[str],
    env: dict[str, str],
    config: str | None,
    command: list[str] | None = None,
    container_label: str | None = None,
) -> Figures:
    workdir = Path(tempfile.mkdtemp(prefix=f"openenv-bench-{name}-"))
    if config is not None:
        (workdir / "config.toml").write_text(config)
        args = ["@", str(workdir / "config.toml"), *args]
    before = env_server_pids(workdir)
    started = time.monotonic()
    proc = subprocess.Popen(
        [*(command or [str(BIN / "eval")]), *args, "--no-push", "--no-rich"],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "stderr.txt").open("w"),
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, tree_rss_mb(proc.pid))
        time.sleep(0.25)
    wall = time.monotonic() - started
    time.sleep(5)
    leftovers = env_server_pids(workdir) - before
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    left_containers = containers_left(container_label) if container_label else 0
    records = [
        json.loads(line)
        for path in [
            *workdir.glob("outputs/*/*/traces.jsonl"),  # verifiers 0.2: one per trace
            *workdir.glob("outputs/*/traces.jsonl"),  # 0.4: one per episode
        ]
        for line in path.read_text().splitlines()
        if line
    ]
    traces = [t for r in records for t in r.get("traces", [r])]
    episode_errors = sum(1 for r in records if "traces" in r and r["errors"])
    if proc.returncode != 0 or not traces:
        tail = (workdir / "stderr.txt").read_text()[-2000:]
        raise SystemExit(f"{name}: eval failed ({proc.returncode}):\n{tail}")
    setups = [
        t["timing"]["setup"]["end"] - t["timing"]["setup"]["start"]
        for t in traces
        if t["timing"].get("setup", {}).get("end")
    ] or [0.0]
    step_ms = [
        1e3
        * (t["timing"]["generation"]["end"] - t["timing"]["generation"]["start"])
        / max(1, (t.get("metrics") or {}).get("openenv_steps") or 1)
        for t in traces
        if t["timing"].get("generation", {}).get("end")
    ] or [0.0]
    user_chars, prompt_chars = zip(
        *(conversation_chars(t) for t in traces), strict=True
    )
    shutil.rmtree(workdir, ignore_errors=True)
    return Figures(
        name=name,
        wall_s=wall,
        rollouts=max(len(traces), len(records)),
        errors=sum(1 for t in traces if t.get("errors")) + episode_errors,
        setup_s=statistics.mean(setups),
        user_chars=statistics.mean(user_chars),
        prompt_chars=statistics.mean(prompt_chars),
        peak_mb=peak,
        step_ms=statistics.mean(step_ms),
        leftovers=len(leftovers) + left_containers,
        error_kinds=tuple(
            sorted(
                {
                    e["message"][:160]
                    for r in [*records, *traces]
                    for e in r.get("errors") or []
                }
            )
        ),
    )


def conversation_chars(trace: dict) -> tuple[int, int]:
    """(characters of the user turns, characters of all prompts sent to the model)."""
    user = prompt = seen = 0
    for node in trace["nodes"]:
        message = node.get("message") or {}
        text = message.get("content")
        size = len(text if isinstance(text, str) else json.dumps(text or ""))
        if message.get("role") == "assistant":
            prompt += seen
        elif message.get("role") == "user":
            user += size
        seen += size
    return user, prompt


def workloads(
    episodes: int, concurrency: int, policy: str, streaming_policy: str
) -> list[tuple]:
    """(name, eval args, environment, config file text or None) per variant. The env
    tasksets get their settings from a config file: the upstream config cannot be
    built from flags (it requires `env` while verifiers builds it from its id)."""
    common = ["-n", str(episodes), "-r", "1", "-c", str(concurrency)]
    common += ["-m", "local-policy", "--client.base-url", policy]
    common += ["--client.api-key-var", "LOCAL_POLICY_KEY"]
    null = [*common, "--harness.id", "null"]
    resets = ", ".join(f"{{ seed = {i} }}" for i in range(episodes))

    def env_config(taskset: str) -> str:
        return (
            f'[taskset]\nid = "{taskset}"\nenv = "local/wordle"\n'
            f"resets = [{resets}]\n\n[taskset.task.user.provider_kwargs]\n"
            f'project_path = "{WORDLE_PROJECT}"\napp = "{WORDLE_APP}"\n'
        )

    base = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    floor_env = {**base, "PYTHONPATH": str(ROOT / "benchmarks")}
    native = [*common, "--taskset.tool-calls", "native"]
    # verifiers 0.4: the same flags. Ours needs no config file (its config is valid
    # from the id alone) and no harness flag.
    common04 = common
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    resets_json = json.dumps([{"seed": i} for i in range(episodes)])
    ours04 = ["openenv-v1", "--env.taskset.env", "local/wordle"]
    ours04 += ["--env.taskset.provider-kwargs", kwargs]
    ours04 += ["--env.taskset.resets", resets_json, *common04]
    native04 = [*ours04, "--env.taskset.tool-calls", "native"]
    # Its `null` harness streams: the same policy behind `streaming_policy.py`.
    builtin04 = [streaming_policy if a == policy else a for a in common04]
    builtin04 += ["--env.player.harness.id", "null"]
    builtin04 += ["--env.player.runtime.type", "subprocess"]
    builtin_config = (
        f'[env.taskset]\nid = "openenv"\nenv = "local/wordle"\n'
        f"resets = [{resets}]\n\n[env.taskset.provider_kwargs]\n"
        f'project_path = "{WORDLE_PROJECT}"\napp = "{WORDLE_APP}"\n'
    )
    shim_env = {**base, "PYTHONPATH": str(ROOT / "benchmarks" / "vf04_builtin_shim")}
    return [
        ("upstream", null, base, env_config("openenv")),
        ("ours", common, base, env_config("openenv-v1")),
        ("native", native, base, env_config("openenv-v1")),
        ("ours-null", null, base, env_config("openenv-v1")),
        (
            "native-null",
            [*native, "--harness.id", "null"],
            base,
            env_config("openenv-v1"),
        ),
        # Played by the package's harness, as `ours` is (its own id has none).
        (
            "floor",
            ["openenv-v1-floor", *common, "--harness.id", "openenv-v1"],
            floor_env,
            None,
        ),
        ("vf04", ours04, base, None, "vf04"),
        ("vf04-native", native04, base, None, "vf04"),
        ("vf04-builtin", builtin04, shim_env, builtin_config, "vf04"),
    ]


def vf04_environment(venv: Path) -> Path:
    """This project's verifiers 0.4 environment at `venv`, synced from `uv.lock`
    (`--extra vf04`); returns its `vf-eval`."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    subprocess.run(
        ["uv", "sync", "--locked", "--extra", "vf04", "--no-group", "vf02", "-q"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return venv / "bin" / "vf-eval"


DOCKER_LEGS = ("docker-shared", "docker-per-rollout")


def run_docker_legs(
    args: argparse.Namespace, policy: str, legs: list[str], figures: list[Figures]
):
    """Time the Wordle image's first build, its reuse and a container's start, then
    run the Docker `legs` (their figures appended to `figures`)."""
    common = ["-n", str(args.episodes), "-r", "1", "-c", str(args.concurrency)]
    common += ["-m", "local-policy", "--client.base-url", policy]
    common += ["--client.api-key-var", "LOCAL_POLICY_KEY"]
    resets = ", ".join(f"{{ seed = {i} }}" for i in range(args.episodes))
    with tempfile.TemporaryDirectory(prefix="openenv-bench-docker-") as parent:
        folder = wordle_image_folder(Path(parent))
        print("timing the Docker image build and a container's start ...", flush=True)
        images = image_figures(folder)
        for leg in legs:
            print(f"running {leg} ...", flush=True)
            run_id, label = run_label(leg)
            env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
            env["OPENENV_V1_RUN_ID"] = run_id
            config = docker_config(folder, resets, shared=leg == "docker-shared")
            figures.append(run_eval(leg, common, env, config, container_label=label))
    return images


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=6)
    parser.add_argument("--step-episodes", type=int, default=40)
    parser.add_argument(
        "--only",
        default="upstream,ours,native,floor,vf04,vf04-native,vf04-builtin,simulator",
        help="comma-separated variants",
    )
    parser.add_argument(
        "--simulator-repeats",
        type=int,
        default=3,
        help="starts of the 0.2 user simulator per way (the median is shown)",
    )
    parser.add_argument(
        "--vf04-venv",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "openenv-v1"
        / "venv-vf04",
        help="where the verifiers 0.4 environment of the vf04 legs is synced",
    )
    args = parser.parse_args()
    wanted = set(args.only.split(","))

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(f"workload: {args.episodes} Wordle episodes, concurrency {args.concurrency}")
    port = free_port()
    policy_cmd = [sys.executable, "-m", "openenv_v1.local_policy", "--mode", "solver"]
    policy = f"http://127.0.0.1:{port}/v1"
    figures: list[Figures] = []
    images = None
    commands: dict[str, list[str]] = {}
    if wanted & {"vf04", "vf04-native", "vf04-builtin"}:
        print(f"syncing the verifiers 0.4 environment at {args.vf04_venv} ...")
        commands["vf04"] = [str(vf04_environment(args.vf04_venv))]
    stream_port = free_port()
    streaming = f"http://127.0.0.1:{stream_port}/v1"
    stream_cmd = [sys.executable, str(ROOT / "benchmarks" / "streaming_policy.py")]
    with (
        served([*policy_cmd, "--port", str(port)], f"{policy}/models"),
        served([*stream_cmd, "--port", str(stream_port)], f"{streaming}/models"),
    ):
        for name, eval_args, env, config, *line in workloads(
            args.episodes, args.concurrency, policy, streaming
        ):
            if name in wanted:
                print(f"running {name} ...", flush=True)
                command = commands[line[0]] if line else None
                figures.append(run_eval(name, eval_args, env, config, command))
        docker_legs = [leg for leg in DOCKER_LEGS if leg in wanted]
        if docker_legs or "image" in wanted:
            images = run_docker_legs(args, policy, docker_legs, figures)

    header = (
        f"{'variant':<19}{'wall s':>8}{'setup s':>9}{'user chars':>12}"
        f"{'prompt chars':>14}{'ms/step':>9}{'peak MB':>9}{'errors':>8}{'left':>6}"
    )
    print("\n" + header)
    for f in figures:
        print(
            f"{f.name:<19}{f.wall_s:>8.1f}{f.setup_s:>9.1f}{f.user_chars:>12.0f}"
            f"{f.prompt_chars:>14.0f}{f.step_ms:>9.0f}{f.peak_mb:>9.0f}"
            f"{f.errors:>4}/{f.rollouts}{f.leftovers:>6}"
        )
    for f in figures:
        for message in f.error_kinds:
            print(f"  {f.name} error: {message}")
    by_name = {f.name: f for f in figures}
    if {"ours", "upstream"} <= by_name.keys():
        ours, upstream = by_name["ours"], by_name["upstream"]
        print(f"\nupstream / ours wall:   {ratio(upstream.wall_s, ours.wall_s)}")
        print(
            f"ours / upstream chars:  {ratio(ours.prompt_chars, upstream.prompt_chars)}"
        )
        print(f"ours / upstream memory: {ratio(ours.peak_mb, upstream.peak_mb)}")
    if {"ours", "native"} <= by_name.keys():
        ours, native = by_name["ours"], by_name["native"]
        print(f"native / ours wall:     {ratio(native.wall_s, ours.wall_s)}")
        print(f"native / ours per step: {ratio(native.step_ms, ours.step_ms)}")
        print(f"native / ours setup:    {ratio(native.setup_s, ours.setup_s)}")
    for leg in ("ours", "native"):
        if {leg, f"{leg}-null"} <= by_name.keys():
            ours, null = by_name[leg], by_name[f"{leg}-null"]
            print(f"{leg} / {leg}-null wall:  {ratio(ours.wall_s, null.wall_s)}")
            print(f"{leg} / {leg}-null setup: {ratio(ours.setup_s, null.setup_s)}")
            print(f"{leg} / {leg}-null step:  {ratio(ours.step_ms, null.step_ms)}")
    if {"ours", "vf04"} <= by_name.keys():
        ours, vf04 = by_name["ours"], by_name["vf04"]
        print(f"vf04 / ours (0.2) wall:  {ratio(vf04.wall_s, ours.wall_s)}")
    if {"vf04", "vf04-native"} <= by_name.keys():
        vf04, native04 = by_name["vf04"], by_name["vf04-native"]
        print(f"vf04-native / vf04 wall: {ratio(native04.wall_s, vf04.wall_s)}")
    if {"vf04", "vf04-builtin"} <= by_name.keys():
        vf04, builtin = by_name["vf04"], by_name["vf04-builtin"]
        print(f"vf04-builtin / vf04 wall: {ratio(builtin.wall_s, vf04.wall_s)}")
    for leg in DOCKER_LEGS:
        if {"ours", leg} <= by_name.keys():
            print(
                f"{leg} / ours wall: {ratio(by_name[leg].wall_s, by_name['ours'].wall_s)}"
            )
    if images is not None:
        starts = ", ".join(f"{s:.1f}" for s in images.container_starts)
        print(
            f"\nDocker image {images.image}: first build {images.first_build_s:.1f} s, "
            f"reused {images.reused_s:.2f} s; a container's start to ready "
            f"{images.container_start_s:.1f} s (median of {starts})"
        )
    if {"ours", "floor"} <= by_name.keys():
        print(
            f"ours / floor wall:      {ratio(by_name['ours'].wall_s, by_name['floor'].wall_s)}"
        )

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = [sys.executable, "-m", "uvicorn", WORDLE_APP, "--port", str(port)]
    with served([*server, "--log-level", "warning"], f"{url}/health"):
        # Three rounds; the middle one by ratio damps a busy moment on the machine.
        rounds = sorted(
            (asyncio.run(step_overhead(url, args.step_episodes)) for _ in range(3)),
            key=lambda r: r[1] / r[0],
        )
        # The 0.2 user simulator's start: forked (as shipped), fresh, and fresh
        # with everything imported.
        starts = (
            measure_starts(url, args.simulator_repeats)
            if "simulator" in wanted
            else None
        )
    raw, ours, inner = rounds[1]
    print(
        f"\nper step (median): raw client {raw * 1e3:.2f} ms, our user {ours * 1e3:.2f} "
        f"ms ({ratio(ours, raw)} raw); the client step inside ours "
        f"{inner * 1e3:.2f} ms ({ratio(ours, inner)})"
    )
    if starts:
        print(
            f"\none verifiers 0.2 user simulator's start:\n{simulator_report(*starts)}"
        )


if __name__ == "__main__":
    main()
