"""`openenv-v1 demo`: the whole loop, offline and keyless, in one command, on
either verifiers line.

Starts the local Wordle env (`wordle_env`, shipped in this package's wheel; its source
is `envs/wordle` of the repository) with this environment's Python (`python -m
openenv_v1.cli.serve wordle_env.server.app:app`) and the scripted policy (`python -m
openenv_v1.local_policy --mode solver`), each on a loopback port it binds itself,
owned by this command (`OwnedProcess`). Then it runs a real eval of
`openenv-wordle-v1` against them as a subprocess, connected to the env by its URL
(verifiers 0.2: `eval ... --taskset.base-url`; 0.4: `vf-eval ...
--env.taskset.base-url`), its progress display on this terminal, and summarizes the
traces it wrote. Nothing is synced or downloaded: an install of the wheel with either
extra runs it anywhere.

`--taskset ID` evals another taskset instead (a package `openenv-v1 init` wrote),
its env launched or reached by that taskset's own settings, and `--replies` makes
the scripted policy play a list of replies (`--mode script`) instead of the Wordle
solver; the summary is the same.

Both run the package's own harness (no harness flag). Everything is stopped on
success, failure and Ctrl-C alike: the eval first (with SIGINT, which verifiers
handles as a graceful shutdown), then the servers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_v1 import verifiers_line
from openenv_v1.cli.procs import OwnedProcess, wait_until_serving

TASKSET = "openenv-wordle-v1"
WORDLE_APP = "wordle_env.server.app:app"
"""The local Wordle env's ASGI app, importable wherever this package is installed."""
MODEL = "local-policy"
KEY_VAR = "LOCAL_POLICY_KEY"
READY_TIMEOUT_S = 60.0
EVAL_GRACE_S = 30.0
SERVER_GRACE_S = 10.0


@dataclass(frozen=True)
class Summary:
    episodes: int
    solved: int
    mean_reward: float
    mean_steps: float
    mean_turns: float
    errors: list[str]
    ended_at_reset: int = 0
    """Episodes the env ended at their reset (metric `openenv_ended_at_reset`)."""


def summarize(traces: list[dict[str, Any]]) -> Summary:
    """Wordle results from eval traces (either line's): solved means reward >= 1 (a
    found word)."""

    def reward(trace: dict[str, Any]) -> float:
        value = (trace.get("rewards") or {}).get("openenv_reward", 0.0)
        if isinstance(value, dict):  # verifiers 0.4: {"score": ...}
            value = value.get("score")
        return float(value or 0.0)

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    def metric(trace: dict[str, Any], name: str) -> float:
        return float((trace.get("metrics") or {}).get(name, 0) or 0)

    rewards = [reward(t) for t in traces]
    steps = [metric(t, "openenv_steps") for t in traces]
    turns = [float(len(t.get("calls") or ())) for t in traces]
    errors = [
        str(e.get("message") or e) if isinstance(e, dict) else str(e)
        for t in traces
        for e in t.get("errors") or ()
    ]
    return Summary(
        episodes=len(traces),
        solved=sum(r >= 1.0 for r in rewards),
        mean_reward=mean(rewards),
        mean_steps=mean(steps),
        mean_turns=mean(turns),
        errors=errors,
        ended_at_reset=sum(metric(t, "openenv_ended_at_reset") >= 1 for t in traces),
    )


def read_traces(path: Path) -> list[dict[str, Any]]:
    """The traces in `path`: a trace per line (verifiers 0.2), or an episode per line
    holding its `traces` (0.4; an episode's own errors go onto its first trace, or
    onto an empty stand-in when it has none)."""
    if not path.exists():
        return []
    traces: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "traces" not in record:
            traces.append(record)
            continue
        episode = list(record["traces"]) or [{"errors": []}]
        first = episode[0]
        first["errors"] = [*(first.get("errors") or ()), *(record.get("errors") or ())]
        traces += episode
    return traces


def eval_command(
    line: str,
    env_url: str | None,
    policy_url: str,
    episodes: int,
    concurrency: int,
    output_dir: Path,
    tool_calls: str = "text",
    taskset: str = TASKSET,
) -> list[str]:
    """The eval of the Wordle env at `env_url` (seeds 0..episodes-1, one rollout
    each), or with `env_url` None of `taskset` by its own settings, as a user would
    type it on verifiers `line`: `eval` on vf02, `vf-eval` on vf04, its outputs in
    `output_dir`."""
    prefix = "--env.taskset." if line == "vf04" else "--taskset."
    native = [f"{prefix}tool-calls", "native"] if tool_calls == "native" else []
    if line == "vf04":
        command = "vf-eval"
        output = ["-o", str(output_dir.parent), "--run.dir", output_dir.name]
    else:
        command, output = "eval", ["-o", str(output_dir)]
    return [
        str(Path(sys.executable).parent / command),
        taskset,
        *_env_flags(prefix, env_url, episodes),
        *native,
        *_run_flags(episodes, concurrency, policy_url),
        *output,
    ]


def _env_flags(prefix: str, env_url: str | None, episodes: int) -> list[str]:
    """The local Wordle env's URL and seeds; nothing for a taskset of its own."""
    if env_url is None:
        return []
    resets = json.dumps([{"seed": seed} for seed in range(episodes)])
    return [f"{prefix}base-url", env_url, f"{prefix}resets", resets]


def _sessions(concurrency: int) -> int:
    """The env server's session limit: every episode in flight holds one."""
    return max(64, concurrency)


def _run_flags(episodes: int, concurrency: int, policy_url: str) -> list[str]:
    return [
        *("-n", str(episodes), "-r", "1", "-c", str(concurrency)),
        *("-m", MODEL, "--client.base-url", policy_url),
        *("--client.api-key-var", KEY_VAR, "--no-push"),
    ]


def _say(line: str) -> None:
    print(f"openenv-v1 demo: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt, also where SIGINT was inherited as
    ignored (a job started with `&` by a script), so both unwind through cleanup."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stop_all(owned: list[OwnedProcess]) -> None:
    """Stop in reverse start order. A further Ctrl-C here cuts the grace periods short
    instead of abandoning the cleanup."""
    hurried = False

    def hurry(signum: int, frame: Any) -> None:
        nonlocal hurried
        hurried = True
        _say("stopping now")

    previous = {s: signal.signal(s, hurry) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in reversed(owned):
            process.stop(lambda: hurried)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _missing_parts(line: str) -> str | None:
    """What this environment lacks to run the demo on verifiers `line`, if anything."""
    program = "vf-eval" if line == "vf04" else "eval"
    if not (Path(sys.executable).parent / program).exists():
        return f"verifiers' `{program}` is not installed next to {sys.executable}"
    return None


def run_demo(args: argparse.Namespace) -> int:
    if args.episodes < 1 or args.concurrency < 1:
        _say("error: --episodes and --concurrency must be at least 1")
        return 2
    line = verifiers_line()
    if problem := _missing_parts(line):
        _say(f"error: {problem}")
        return 1
    taskset = args.taskset or TASKSET
    output_dir = Path(args.output_dir or default_output_dir(line, taskset)).resolve()
    if (output_dir / "traces.jsonl").exists():
        _say(f"error: {output_dir} already holds a run; choose another --output-dir")
        return 2
    started = time.monotonic()
    owned: list[OwnedProcess] = []
    eval_code: int | None = None
    eval_s = 0.0
    with tempfile.TemporaryDirectory(prefix="openenv-v1-demo-") as tmp:
        logs = Path(tmp)
        try:
            with _signals_interrupt():
                env_url, policy_url = _start_servers(args, logs, owned)
                flags = (args.episodes, args.concurrency, output_dir, args.tool_calls)
                command = eval_command(
                    line, env_url, policy_url, *flags, taskset=taskset
                )
                shown = [Path(command[0]).name, *command[1:]]
                _say(f"{KEY_VAR}=local {shlex.join(shown)}")
                eval_started = time.monotonic()
                # SIGINT: verifiers' eval shuts down gracefully on it.
                evaluation = OwnedProcess(
                    "eval",
                    command,
                    env={**os.environ, KEY_VAR: "local"},
                    stop_signal=signal.SIGINT,
                    grace_s=EVAL_GRACE_S,
                )
                owned.append(evaluation)
                eval_code = evaluation.popen.wait()
                eval_s = time.monotonic() - eval_started
        except KeyboardInterrupt:
            _say("interrupted; stopping everything it started")
            return 130
        except (RuntimeError, OSError) as e:
            _say(f"error: {e}")
            return 1
        finally:
            _stop_all(owned)
    return _report(args, output_dir, eval_code, eval_s, time.monotonic() - started)


def default_output_dir(line: str, taskset: str = TASKSET) -> Path:
    """Where the eval writes unless `--output-dir` says: verifiers' own layout for
    the run (harness: the taskset's own)."""
    run = uuid.uuid4().hex
    if line == "vf04":
        return Path("outputs", f"{taskset}--{MODEL}--{taskset}--{run[:8]}")
    return Path("outputs", f"{taskset}--{MODEL}--{taskset}", run)


def _start_servers(
    args: argparse.Namespace, logs: Path, owned: list[OwnedProcess]
) -> tuple[str | None, str]:
    """Start the scripted policy and, unless `--taskset` names another, the local
    Wordle env (appended to `owned`), then wait until both serve (they load side by
    side); returns the env's URL (None with `--taskset`) and the policy's `/v1`
    URL."""
    mode = ["--mode", "solver"]
    if args.replies:
        script = logs / "replies.json"
        script.write_text(json.dumps(args.replies))
        mode = ["--mode", "script", "--script", str(script)]
    policy, policy_port = _serve(
        "the local policy",
        "policy",
        ["openenv_v1.local_policy", *mode],
        args.policy_port,
        logs,
        owned,
    )
    policy_url = f"http://127.0.0.1:{policy_port}"
    if args.taskset:
        wait_until_serving(policy, f"{policy_url}/v1/models", READY_TIMEOUT_S)
        _say(f"scripted policy at {policy_url}/v1")
        return None, f"{policy_url}/v1"
    env, env_port = _serve(
        "the local Wordle env",
        "wordle",
        ["openenv_v1.cli.serve", WORDLE_APP],
        args.env_port,
        logs,
        owned,
        env={**os.environ, "WORDLE_MAX_SESSIONS": str(_sessions(args.concurrency))},
    )
    env_url = f"http://127.0.0.1:{env_port}"
    wait_until_serving(policy, f"{policy_url}/v1/models", READY_TIMEOUT_S)
    _say(f"scripted policy at {policy_url}/v1")
    wait_until_serving(env, f"{env_url}/health", READY_TIMEOUT_S)
    _say(f"Wordle env at {env_url}")
    return env_url, f"{policy_url}/v1"


def _serve(
    name: str,
    stem: str,
    module_args: list[str],
    port: int,
    logs: Path,
    owned: list[OwnedProcess],
    env: dict[str, str] | None = None,
) -> tuple[OwnedProcess, int]:
    """`python -m <module_args> --port P --port-file F` from this environment; returns
    the process and the port it bound (P, or a free one for 0). Its output goes to
    `<logs>/<stem>.log`."""
    port_file = logs / f"{stem}.port"
    process = OwnedProcess(
        name,
        [
            *(sys.executable, "-m", *module_args),
            *("--port", str(port), "--port-file", str(port_file)),
        ],
        log_path=logs / f"{stem}.log",
        env=env,
        grace_s=SERVER_GRACE_S,
    )
    owned.append(process)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not port_file.exists() or not port_file.read_text().strip():
        if process.poll() is not None or time.monotonic() >= deadline:
            raise RuntimeError(
                f"{name} did not start; its output ends with:\n{process.log_tail()}"
            )
        time.sleep(0.1)
    return process, int(port_file.read_text())


def _report(
    args: argparse.Namespace,
    output_dir: Path,
    eval_code: int | None,
    eval_s: float,
    wall_s: float,
) -> int:
    traces_path = output_dir / "traces.jsonl"
    summary = summarize(read_traces(traces_path))
    rows = [
        (
            "episodes",
            f"{summary.episodes} of {args.episodes} ({args.concurrency} at a time)",
        ),
        ("solved", f"{summary.solved}/{summary.episodes} (reward >= 1)"),
        ("mean reward", f"{summary.mean_reward:.2f}"),
        (
            "mean steps",
            f"{summary.mean_steps:.1f} env steps, {summary.mean_turns:.1f} model turns "
            "per episode",
        ),
        ("wall time", f"{wall_s:.1f}s (eval {eval_s:.1f}s)"),
        ("traces", str(traces_path) if traces_path.exists() else "(none written)"),
    ]
    if summary.ended_at_reset:
        rows.append(
            (
                "at reset",
                f"{summary.ended_at_reset} of {summary.episodes} (the env ended the "
                "episode at its reset: it could not be played)",
            )
        )
    if summary.errors:
        rows.append(("errors", f"{len(summary.errors)}: {summary.errors[0]}"))
    print("\nopenenv-v1 demo summary")
    for label, text in rows:
        print(f"  {label:<14}{text}")
    if eval_code != 0:
        print(
            f"openenv-v1 demo: eval failed with exit code {eval_code}; its log is "
            f"under {output_dir}",
            file=sys.stderr,
        )
        return 1
    if summary.errors or summary.episodes < args.episodes:
        print("openenv-v1 demo: some episodes did not complete", file=sys.stderr)
        return 1
    return 0
