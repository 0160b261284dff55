"""`openenv-v1 demo`: the whole loop, offline and keyless, in one command, on
either verifiers line.

Starts the scripted policy (`python -m openenv_v1.local_policy --mode solver`) on a
loopback port it binds itself, owned by this command (`OwnedProcess`), then runs a
real eval of `openenv-wordle-v1` against it as a subprocess, its progress display on
this terminal, and summarizes the traces it wrote:

- verifiers 0.2 (`eval`): the local Wordle env (`wordle_env`, installed in this
  environment) is served by this command too (`python -m openenv_v1.cli.serve
  wordle_env.server.app:app`) and the eval connects to it (`--taskset.base-url`);
- verifiers 0.4 (`vf-eval`): the env cannot be installed next to verifiers 0.4
  (it needs openenv 0.10), so the eval launches it from its folder, `envs/wordle`,
  as it launches any env (`project_path`, one UV-launched server the eval shares
  and stops).

Both run the package's own harness (no harness flag). Everything is stopped on
success, failure and Ctrl-C alike: the eval first (with SIGINT, which verifiers
handles as a graceful shutdown), then the servers.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shlex
import shutil
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
WORDLE_PROJECT = Path(__file__).resolve().parents[2] / "envs" / "wordle"
"""The local Wordle env's project folder in a checkout of this repository."""
WORDLE_APP = "wordle_env.server.app:app"
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

    rewards = [reward(t) for t in traces]
    steps = [float((t.get("metrics") or {}).get("openenv_steps", 0)) for t in traces]
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
    env_url: str,
    policy_url: str,
    episodes: int,
    concurrency: int,
    output_dir: Path,
    tool_calls: str = "text",
) -> list[str]:
    """verifiers 0.2: the eval of the Wordle env at `env_url`, as a user would type
    it (seeds 0..episodes-1, one rollout each)."""
    native = ["--taskset.tool-calls", "native"] if tool_calls == "native" else []
    return [
        str(Path(sys.executable).parent / "eval"),
        TASKSET,
        "--taskset.base-url",
        env_url,
        "--taskset.resets",
        _resets(episodes),
        *native,
        *_run_flags(episodes, concurrency, policy_url),
        "-o",
        str(output_dir),
    ]


def vf_eval_command(
    policy_url: str,
    episodes: int,
    concurrency: int,
    output_dir: Path,
    tool_calls: str = "text",
    env_port: int = 0,
) -> list[str]:
    """verifiers 0.4: the eval launching the Wordle env from `WORDLE_PROJECT` (on
    `env_port`, unless 0), as a user would type it."""
    kwargs: dict[str, Any] = {
        "project_path": str(WORDLE_PROJECT),
        "app": WORDLE_APP,
        "env_vars": {"WORDLE_MAX_SESSIONS": str(_sessions(concurrency))},
    }
    if env_port:
        kwargs["port"] = env_port
    native = ["--env.taskset.tool-calls", "native"] if tool_calls == "native" else []
    return [
        str(Path(sys.executable).parent / "vf-eval"),
        TASKSET,
        "--env.taskset.provider-kwargs",
        json.dumps(kwargs),
        "--env.taskset.resets",
        _resets(episodes),
        *native,
        *_run_flags(episodes, concurrency, policy_url),
        "-o",
        str(output_dir.parent),
        "--run.dir",
        output_dir.name,
    ]


def _resets(episodes: int) -> str:
    return json.dumps([{"seed": seed} for seed in range(episodes)])


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
    bindir = Path(sys.executable).parent
    if line == "vf04":
        if not (WORDLE_PROJECT / "pyproject.toml").exists():
            return (
                f"the local Wordle env's project is not at {WORDLE_PROJECT}: run the "
                "demo from a checkout of the openenv-v1 repository"
            )
        if shutil.which("uv") is None:
            return "`uv` is not on PATH; the eval launches the Wordle env with it"
        if not (bindir / "vf-eval").exists():
            return f"verifiers' `vf-eval` is not installed next to {sys.executable}"
        return None
    if importlib.util.find_spec("wordle_env") is None:
        return (
            "the local Wordle env (`wordle_env`, envs/wordle) is not installed in this "
            "environment: run `uv sync` in the openenv-v1 repository"
        )
    if not (bindir / "eval").exists():
        return f"verifiers' `eval` is not installed next to {sys.executable}"
    return None


def run_demo(args: argparse.Namespace) -> int:
    if args.episodes < 1 or args.concurrency < 1:
        _say("error: --episodes and --concurrency must be at least 1")
        return 2
    line = verifiers_line()
    if problem := _missing_parts(line):
        _say(f"error: {problem}")
        return 1
    output_dir = Path(args.output_dir or default_output_dir(line)).resolve()
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
                policy_url = _start_policy(args, logs, owned)
                if line == "vf04":
                    command = vf_eval_command(
                        policy_url,
                        args.episodes,
                        args.concurrency,
                        output_dir,
                        args.tool_calls,
                        args.env_port,
                    )
                else:
                    command = eval_command(
                        _start_env(args, logs, owned),
                        policy_url,
                        args.episodes,
                        args.concurrency,
                        output_dir,
                        args.tool_calls,
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


def default_output_dir(line: str) -> Path:
    """Where the eval writes unless `--output-dir` says: verifiers' own layout for
    the run (harness: the taskset's own)."""
    run = uuid.uuid4().hex
    if line == "vf04":
        return Path("outputs", f"{TASKSET}--{MODEL}--{TASKSET}--{run[:8]}")
    return Path("outputs", f"{TASKSET}--{MODEL}--{TASKSET}", run)


def _start_env(args: argparse.Namespace, logs: Path, owned: list[OwnedProcess]) -> str:
    """Start the local Wordle env (appended to `owned`) and wait until it serves;
    returns its URL."""
    process, port = _serve(
        "the local Wordle env",
        "wordle",
        ["openenv_v1.cli.serve", WORDLE_APP],
        args.env_port,
        logs,
        owned,
        env={**os.environ, "WORDLE_MAX_SESSIONS": str(_sessions(args.concurrency))},
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, f"{url}/health", READY_TIMEOUT_S)
    _say(f"Wordle env at {url}")
    return url


def _start_policy(
    args: argparse.Namespace, logs: Path, owned: list[OwnedProcess]
) -> str:
    """Start the scripted policy (appended to `owned`) and wait until it serves;
    returns its `/v1` URL."""
    process, port = _serve(
        "the local policy",
        "policy",
        ["openenv_v1.local_policy", "--mode", "solver"],
        args.policy_port,
        logs,
        owned,
    )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(process, f"{url}/v1/models", READY_TIMEOUT_S)
    _say(f"scripted policy at {url}/v1")
    return f"{url}/v1"


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
