"""Legs that run one eval: `vf02` (`eval`), `vf04` (`vf-eval`) and `floor`
(`vf-eval` of `benchmarks/openenv_v1_floor_vf04.py`: no OpenEnv at all)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from openenv_v1.core.launch.process_group import die_with_owner
from scaling.procs import (
    ROOT,
    WORDLE_APP,
    WORDLE_PROJECT,
    Sampler,
    close_leg,
    wordle_servers_of_this_checkout,
)
from scaling.results import LegResult, check_traces, count_lines, read_jsonl

VF02_BIN = Path(sys.executable).parent


def resets(episodes: int) -> list[dict]:
    return [{"seed": i} for i in range(episodes)]


def eval_leg(
    leg: str,
    command: list[str],
    level: int,
    episodes: int,
    pattern: str,
    *,
    stop: str = "openenv_done",
    extra_env: dict[str, str] | None = None,
) -> LegResult:
    """One `eval` / `vf-eval` run; traces are read from its outputs, and an episode
    is ok when it ended on `stop` without an error."""
    workdir = Path(tempfile.mkdtemp(prefix=f"openenv-scale-{leg}-"))
    before = wordle_servers_of_this_checkout()
    env = {**os.environ, "LOCAL_POLICY_KEY": "local", **(extra_env or {})}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    with (workdir / "stderr.txt").open("w") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=die_with_owner,
        )
        with Sampler(proc.pid, count_lines(pattern, workdir)) as sampler:
            proc.wait()
    wall = time.monotonic() - started
    records = read_jsonl(workdir.glob(pattern))
    traces = [t for r in records for t in r.get("traces", [r])]
    result = LegResult(leg, level, episodes, 0, wall, [])
    check_traces(traces, result, stop)
    print(
        f"  {leg} @ {level}: {len(result.actions)} episodes' replies kept"
        + (
            f", {sampler.peak_simulators} simulators alive at most"
            if leg == "vf02"
            else ""
        ),
        flush=True,
    )
    if proc.returncode != 0:
        tail = (workdir / "stderr.txt").read_text()[-600:]
        result.errors.append(f"exit {proc.returncode}: {tail}")
    result.errors += ["lost"] * (episodes - len(traces))
    return close_leg(result, sampler, before, workdir)


def run_flags(policy_url: str, level: int, episodes: int) -> list[str]:
    """The flags both verifiers lines' evals take alike: the run's size, the local
    policy, no push."""
    return [
        *("-n", str(episodes), "-r", "1", "-c", str(level)),
        *("-m", "local-policy", "--client.base-url", policy_url),
        *("--client.api-key-var", "LOCAL_POLICY_KEY", "--no-push"),
    ]


def vf04_command(
    vf04_bin: Path, policy_url: str, level: int, episodes: int, flags: list[str]
) -> list:
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    return [
        str(vf04_bin / "vf-eval"),
        *("openenv-v1", "--env.taskset.env", "local/wordle"),
        *("--env.taskset.provider-kwargs", kwargs),
        *("--env.taskset.resets", json.dumps(resets(episodes))),
        *run_flags(policy_url, level, episodes),
        *flags,
    ]


def vf02_command(
    policy_url: str, level: int, episodes: int, config: Path, extra: list[str]
) -> list:
    config.write_text(
        '[taskset]\nid = "openenv-v1"\nenv = "local/wordle"\n'
        f"resets = [{', '.join(f'{{ seed = {i} }}' for i in range(episodes))}]\n\n"
        "[taskset.task.user.provider_kwargs]\n"
        f'project_path = "{WORDLE_PROJECT}"\napp = "{WORDLE_APP}"\n'
    )
    return [
        *(str(VF02_BIN / "eval"), "@", str(config)),
        *run_flags(policy_url, level, episodes),
        *extra,
        "--no-rich",
    ]


FLOOR_STOP = "floor_done"


def floor_leg(
    vf04_bin: Path,
    policy_url: str,
    level: int,
    episodes: int,
    shown: dict[int, list[str]],
    flags: list[str],
) -> LegResult:
    """`vf-eval` of the floor env (no OpenEnv): episode `i` shows the model the user
    texts the `vf04` leg's episode of seed `i` was shown (`shown`), one a turn, so
    both legs make the same model calls on the same conversations; a seed the
    `vf04` leg did not play well gets an empty entry (the floor env's canned turns)."""
    texts = [shown.get(i, []) for i in range(episodes)]
    texts_file = Path(tempfile.mkdtemp(prefix="openenv-scale-floor-texts-")) / "t.json"
    texts_file.write_text(json.dumps(texts))
    command = [
        str(vf04_bin / "vf-eval"),
        *("openenv-v1-floor-vf04", "--env.taskset.texts-file", str(texts_file)),
        *run_flags(policy_url, level, episodes),
        *flags,
    ]
    try:
        result = eval_leg(
            "floor",
            command,
            level,
            episodes,
            "outputs/*/traces.jsonl",
            stop=FLOOR_STOP,
            extra_env={"PYTHONPATH": str(ROOT / "benchmarks")},
        )
    finally:
        shutil.rmtree(texts_file.parent, ignore_errors=True)
    return result
