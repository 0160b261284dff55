"""`vf-eval` runs as a user types them, and what they wrote."""

import json
import subprocess
from pathlib import Path

from tests import zygote
from tests.servers import BIN, WORDLE_APP, WORDLE_PROJECT, eval_environ


def vf_eval_command(args: list[str]) -> list[str]:
    return [str(BIN / "vf-eval"), *args, "--no-push"]


def run_vf_eval(
    args: list[str],
    cwd: Path,
    timeout: float = 300.0,
    environ: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """`vf-eval ...` as a user types it (no push), with `environ` added to its
    environment, forked from the worker's eval zygote (`tests/zygote.py`); returns the process and its episodes (each with its `traces`)."""
    proc = zygote.run(
        vf_eval_command(args), cwd=cwd, env=eval_environ(environ), timeout=timeout
    )
    return proc, read_episodes(cwd)


def read_episodes(cwd: Path) -> list[dict]:
    episodes = []
    for path in sorted(cwd.glob("outputs/*/traces.jsonl")):
        episodes += [json.loads(line) for line in path.read_text().splitlines() if line]
    return episodes


def traces_of(episodes: list[dict]) -> list[dict]:
    return [trace for episode in episodes for trace in episode["traces"]]


def wordle_uv_flags(resets: str, app: str = WORDLE_APP) -> list[str]:
    """Flags launching the local Wordle project with UV, one task per reset."""
    kwargs = f'{{"project_path": "{WORDLE_PROJECT}", "app": "{app}"}}'
    return [
        "openenv-v1",
        "--env.taskset.env",
        "local/wordle",
        "--env.taskset.provider-kwargs",
        kwargs,
        "--env.taskset.resets",
        resets,
    ]
