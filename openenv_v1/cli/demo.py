"""`openenv-v1 demo`: the whole loop, offline and keyless, on either verifiers line.

It starts the local Wordle env (`python -m openenv_v1.cli.serve
wordle_env.server.app:app`; the wheel ships `wordle_env`) and the scripted policy
(`python -m openenv_v1.local_policy --mode solver`), each on a port it binds itself
and owned by this command; then runs a real eval of `openenv-wordle-v1` connected to
the env by its URL (`eval` on 0.2, `vf-eval` on 0.4), its progress on this terminal,
and summarizes its traces. `--taskset ID` evals another taskset by its own settings;
`--replies` makes the policy play a list of replies. Everything is stopped on
success, failure and Ctrl-C alike: the eval first (SIGINT, verifiers' graceful
shutdown), then the servers.
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
from collections.abc import Callable, Iterator
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
    """The eval a user would type on verifiers `line`: of the Wordle env at `env_url`
    (seeds 0..episodes-1), or with `env_url` None of `taskset` by its own settings;
    its outputs in `output_dir`."""
    prefix = "--env.taskset." if line == "vf04" else "--taskset."
    command = [str(_eval_program(line)), taskset]
    if env_url is not None:
        resets = json.dumps([{"seed": seed} for seed in range(episodes)])
        command += [f"{prefix}base-url", env_url, f"{prefix}resets", resets]
    if tool_calls == "native":
        command += [f"{prefix}tool-calls", "native"]
    command += ["-n", str(episodes), "-r", "1", "-c", str(concurrency)]
    command += ["-m", MODEL, "--client.base-url", policy_url]
    command += ["--client.api-key-var", KEY_VAR, "--no-push"]
    if line == "vf04":
        return [*command, "-o", str(output_dir.parent), "--run.dir", output_dir.name]
    return [*command, "-o", str(output_dir)]


def _eval_program(line: str) -> Path:
    """verifiers' eval command of `line`, beside this Python."""
    return Path(sys.executable).parent / ("vf-eval" if line == "vf04" else "eval")


def _say(line: str) -> None:
    print(f"openenv-v1 demo: {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _on_stop_signals(handler: Callable[[int, Any], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call `handler` within the block, also where SIGINT was
    inherited as ignored (a job started with `&` by a script)."""
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _stop_all(owned: list[OwnedProcess]) -> None:
    """Stop in reverse start order; a further Ctrl-C cuts the grace periods short
    instead of abandoning the cleanup."""
    hurried = False

    def hurry(signum: int, frame: Any) -> None:
        nonlocal hurried
        hurried = True
        _say("stopping now")

    with _on_stop_signals(hurry):
        for process in reversed(owned):
            process.stop(lambda: hurried)


def run_demo(args: argparse.Namespace) -> int:
    if args.episodes < 1 or args.concurrency < 1:
        _say("error: --episodes and --concurrency must be at least 1")
        return 2
    line = verifiers_line()
    if not (program := _eval_program(line)).exists():
        _say(
            f"error: verifiers' `{program.name}` is not installed next to {sys.executable}"
        )
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
        try:
            with _on_stop_signals(_interrupt):
                env_url, policy_url = _start_servers(args, Path(tmp), owned)
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
    """Where the eval writes unless `--output-dir` says: verifiers' own layout."""
    run = uuid.uuid4().hex
    if line == "vf04":
        return Path("outputs", f"{taskset}--{MODEL}--{taskset}--{run[:8]}")
    return Path("outputs", f"{taskset}--{MODEL}--{taskset}", run)


def _start_servers(
    args: argparse.Namespace, logs: Path, owned: list[OwnedProcess]
) -> tuple[str | None, str]:
    """Start the scripted policy and, without `--taskset`, the local Wordle env
    (into `owned`), and wait until both serve; the env's URL (None with `--taskset`)
    and the policy's `/v1` URL."""
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
    if not args.taskset:
        # Every episode in flight holds a session.
        sessions = str(max(64, args.concurrency))
        env, env_port = _serve(
            "the local Wordle env",
            "wordle",
            ["openenv_v1.cli.serve", WORDLE_APP],
            args.env_port,
            logs,
            owned,
            env={**os.environ, "WORDLE_MAX_SESSIONS": sessions},
        )
    wait_until_serving(policy, f"{policy_url}/v1/models", READY_TIMEOUT_S)
    _say(f"scripted policy at {policy_url}/v1")
    if args.taskset:
        return None, f"{policy_url}/v1"
    env_url = f"http://127.0.0.1:{env_port}"
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
    """`python -m <module_args> --port P --port-file F`, its output in
    `<logs>/<stem>.log`; the process and the port it bound."""
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
    episodes = summary.episodes
    rows = {
        "episodes": f"{episodes} of {args.episodes} ({args.concurrency} at a time)",
        "solved": f"{summary.solved}/{episodes} (reward >= 1)",
        "mean reward": f"{summary.mean_reward:.2f}",
        "mean steps": f"{summary.mean_steps:.1f} env steps, "
        f"{summary.mean_turns:.1f} model turns per episode",
        "wall time": f"{wall_s:.1f}s (eval {eval_s:.1f}s)",
        "traces": str(traces_path) if traces_path.exists() else "(none written)",
    }
    if summary.ended_at_reset:
        rows["at reset"] = (
            f"{summary.ended_at_reset} of {episodes} (the env ended the episode at "
            "its reset: it could not be played)"
        )
    if summary.errors:
        rows["errors"] = f"{len(summary.errors)}: {summary.errors[0]}"
    print("\nopenenv-v1 demo summary")
    for label, text in rows.items():
        print(f"  {label:<14}{text}")
    if eval_code != 0:
        _say(f"eval failed with exit code {eval_code}; its log is under {output_dir}")
        return 1
    if summary.errors or episodes < args.episodes:
        _say("some episodes did not complete")
        return 1
    return 0
