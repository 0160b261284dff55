"""The trainer's path: verifiers 0.4's env server (`serve_env`) driven by
`EnvClient.run`, as prime-rl's orchestrator drives it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from openenv_v1.core.launch.process_group import die_with_owner
from scaling.eval_legs import resets
from scaling.procs import (
    ROOT,
    WORDLE_APP,
    WORDLE_PROJECT,
    Sampler,
    close_leg,
    free_port,
    stop_group,
    wordle_servers_of_this_checkout,
)
from scaling.results import LegResult, check_traces, count_lines, read_jsonl

SCALE = ROOT / "benchmarks" / "scale.py"
"""The entry point, which runs `serve` and `trainer` in the 0.4 environment."""


def server_leg(vf04_bin: Path, policy_url: str, level: int, episodes: int):
    """`serve_env` (2 workers) in its own process, driven by `EnvClient.run` from a
    second process (`--trainer`), both in the verifiers 0.4 environment."""
    workdir = Path(tempfile.mkdtemp(prefix="openenv-scale-server-"))
    address = f"tcp://127.0.0.1:{free_port()}"
    taskset = {
        "id": "openenv-v1",
        "env": "local/wordle",
        "provider_kwargs": {"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP},
        "resets": resets(episodes),
    }
    python = str(vf04_bin / "python")
    before = wordle_servers_of_this_checkout()
    env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    env.pop("VIRTUAL_ENV", None)
    server = subprocess.Popen(
        [python, str(SCALE), "--serve", address, json.dumps({"taskset": taskset})],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "server.txt").open("w"),
        preexec_fn=die_with_owner,
    )
    out = workdir / "traces.jsonl"
    result = LegResult("vf04-server", level, episodes, 0, 0.0, [])
    try:
        trainer = [python, str(SCALE), "--trainer", address, policy_url, str(level)]
        trainer += [json.dumps(taskset), str(out)]
        with Sampler(server.pid, count_lines("traces.jsonl", workdir)) as sampler:
            proc = subprocess.run(
                trainer,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                preexec_fn=die_with_owner,
            )
        if proc.returncode != 0:
            result.errors.append(
                f"trainer exit {proc.returncode}: {proc.stderr[-600:]}"
            )
        result.wall_s = json.loads(proc.stdout.strip().splitlines()[-1])["wall_s"]
    finally:
        stop_group(server)
    traces = read_jsonl([out]) if out.exists() else []
    check_traces(traces, result)
    result.errors += ["lost"] * (episodes - len(traces))
    return close_leg(result, sampler, before, workdir)


def serve(address: str, config: str) -> None:
    """(In the verifiers 0.4 environment.) An env server as prime-rl starts one."""
    from verifiers.v1.serve import serve_env

    serve_env(
        max_workers=2, elastic=False, address=address, config_data=json.loads(config)
    )


def trainer(address: str, policy_url: str, level: int, taskset: str, out: str) -> None:
    """(In the verifiers 0.4 environment.) Every task through `EnvClient.run`,
    `level` at once, as prime-rl's orchestrator sends them; traces appended to `out`
    as they come back; prints the wall time of the run."""
    from verifiers.v1 import SamplingConfig
    from verifiers.v1.configs.client import EvalClientConfig
    from verifiers.v1.serve import EnvClient

    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset

    with contextlib.closing(OpenEnvTaskset(OpenEnvConfig(**json.loads(taskset)))) as ts:
        tasks = [t.data.model_dump(mode="json") for t in ts.load()]

    async def main() -> float:
        client = EnvClient(address)
        await client.wait_for_server_startup(timeout=300)
        model = EvalClientConfig(base_url=policy_url, api_key_var="LOCAL_POLICY_KEY")
        gate = asyncio.Semaphore(level)
        with open(out, "a") as sink:

            async def one(task: dict) -> None:
                async with gate:
                    try:
                        episode = await client.run(
                            model, "local-policy", SamplingConfig(), task
                        )
                        lines = [t.model_dump_json() for t in episode.traces]
                    except Exception as e:
                        failed = {"errors": [{"message": f"{type(e).__name__}: {e}"}]}
                        lines = [json.dumps(failed)]
                    sink.write("".join(line + "\n" for line in lines))
                    sink.flush()

            started = time.monotonic()
            await asyncio.gather(*(one(task) for task in tasks))
            wall = time.monotonic() - started
        await client.close()
        return wall

    print(json.dumps({"wall_s": asyncio.run(main())}))
