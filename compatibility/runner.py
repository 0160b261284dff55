"""Running one env: its recipe prepared, `openenv-v1 check --json`, then one real eval
against the local policy in script mode, and the sweep for what was left running."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from compatibility import recipes
from compatibility.causes import classify
from compatibility.commands import (
    KEY_VAR,
    check_command,
    eval_command,
    find_python,
    read_traces,
)
from compatibility.env_table import ENVS, EnvSpec, step_timeout
from compatibility.processes import (
    env_venv_needle,
    policy_server,
    processes_under,
    run_group,
    sweep,
)
from compatibility.report import (
    Result,
    all_user_texts,
    first_user_text,
    reward_of,
    rounded,
    short_error,
    summarize_check,
)

__all__ = ["run_env"]


def run_check(
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    workdir: Path,
    environ: dict[str, str],
    web_ui: bool,
) -> tuple[dict[str, Any] | None, str]:
    cmd = check_command(env_dir, spec, args, web_ui)
    timeout = args.launch_timeout + 6 * step_timeout(spec, args) + 60
    code, out, err, _ = run_group(cmd, cwd=workdir, timeout=timeout, env=environ)
    if code is None:
        return None, f"check did not finish within {timeout:.0f}s (hang)"
    try:
        return json.loads(out), ""
    except ValueError:
        tail = (err or out).strip()[-800:]
        return None, f"check exited {code} without a JSON report: {tail}"


def run_eval(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    workdir: Path,
    environ: dict[str, str],
    web_ui: bool,
) -> tuple[str, list[str], dict[str, Any] | None]:
    out_dir = workdir / "eval"
    assert spec.script is not None
    with policy_server(spec.script, workdir) as policy:
        cmd = eval_command(env, env_dir, spec, policy, out_dir, args, web_ui)
        timeout = args.launch_timeout + spec.max_turns * step_timeout(spec, args) + 180
        code, out, err, seconds = run_group(
            cmd, cwd=workdir, timeout=timeout, env={**environ, KEY_VAR: "local"}
        )
    traces = read_traces(out_dir)
    (workdir / "eval.stderr").write_text(err)
    with contextlib.suppress(OSError):
        (workdir / "traces.jsonl").write_text(
            "".join(json.dumps(t) + "\n" for t in traces)
        )
    if code is None:
        return "HANG", [f"eval did not finish within {timeout:.0f}s"], None
    if not traces:
        tail = (err or out).strip()[-600:]
        return "FAIL", [f"eval exited {code}, no trace: {tail}"], None
    trace = traces[0]
    summary = {
        "returncode": code,
        "seconds": round(seconds, 1),
        "stop_condition": trace.get("stop_condition"),
        "reward": rounded(reward_of(trace)),
        "steps": (trace.get("metrics") or {}).get("openenv_steps"),
        "invalid": (trace.get("metrics") or {}).get("openenv_invalid_action_count"),
        "turns": len(trace.get("calls") or ()),
        "errors": [
            (e.get("type"), str(e.get("message"))[:600]) if isinstance(e, dict) else e
            for e in trace.get("errors") or ()
        ],
    }
    notes = [
        f"eval {summary['seconds']}s: stop `{summary['stop_condition']}`, reward "
        f"{summary['reward']}, {summary['steps']} steps, {summary['invalid']} invalid"
    ]
    first_user = first_user_text(trace)
    if first_user is not None:
        if "structured_content" in first_user:
            notes.append("model saw raw `structured_content`")
        later = all_user_texts(trace)[1:]
        if any("structured_content" in t for t in later):
            notes.append("tool results shown as raw `structured_content`")
    for kind, message in summary["errors"]:
        owner = classify(message)
        if "failed a first request" in message:
            owner = "adapter? (the shared server's first `state` request)"
        notes.append(f"{owner}: error {kind}: {message[:300]}")
    status = "ok" if code == 0 and not summary["errors"] else "FAIL"
    return status, notes, summary


def run_env(env: str, envs_dir: Path, args: argparse.Namespace) -> Result:
    env_dir = (envs_dir / env).resolve()
    spec = ENVS.get(env, EnvSpec())
    result = Result(env)
    if env not in ENVS:
        result.notes.append("not in the table: empty reset, no action, no eval")
    if spec.skip and not args.all:
        result.check = result.eval = "skipped"
        result.notes.append(f"env's own need: {spec.skip}")
        return result
    if args.docker and spec.docker_skip and not args.all:
        result.check = result.eval = "skipped"
        result.notes.append(f"in Docker: {spec.docker_skip}")
        return result
    if spec.note:
        result.notes.append(spec.note)
    try:
        return _run_recipe(env, env_dir, spec, args, result)
    except recipes.RecipeFailed as e:
        result.check, result.eval = "FAIL (recipe)", "not run"
        result.notes.append(f"{classify(str(e))}: recipe: {e}")
        return result


def _run_recipe(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    result: Result,
) -> Result:
    environ = dict(os.environ)
    with recipes.prepared(env, env_dir, docker=args.docker) as extra:
        spec = replace(spec, env_vars={**spec.env_vars, **extra.env_vars})
        more = {**(spec.docker_kwargs if args.docker else {}), **extra.provider_kwargs}
        if args.docker and spec.docker_kwargs:
            result.notes.append(f"provider_kwargs {json.dumps(spec.docker_kwargs)}")
        if more:
            kwargs = {**args.provider_kwargs, **more}
            args = argparse.Namespace(**{**vars(args), "provider_kwargs": kwargs})
        environ.update(extra.environ)
        result.notes += extra.notes
        return _run_prepared(env, env_dir, spec, args, result, environ)


def _run_prepared(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    result: Result,
    environ: dict[str, str],
) -> Result:
    if python := find_python(env_dir):
        environ["UV_PYTHON"] = python
        result.notes.append(f"UV_PYTHON={python} (requires-python)")
    before = {pid for pid, _ in processes_under(str(env_dir), env_venv_needle(env_dir))}
    with tempfile.TemporaryDirectory(prefix=f"compat-{env}-") as tmp:
        workdir = Path(tmp)
        try:
            web_ui = spec.web_ui
            report, problem = run_check(env_dir, spec, args, workdir, environ, web_ui)
            result.check_report = report
            if report is None:
                result.check = "HANG" if "hang" in problem else "FAIL"
                result.notes.append(f"adapter?: {problem}")
            else:
                result.notes += summarize_check(report)
                if report.get("ok"):
                    result.check = "ok"
                else:
                    failure = report["failure"]
                    result.check = f"FAIL ({failure.get('stage')})"
                    text = short_error(failure)
                    owner = classify(failure.get("error", ""))
                    result.notes.append(f"{owner}: {text}")
            if args.no_eval or spec.script is None:
                result.eval = "-" if spec.script is None else "not run"
            elif result.check != "ok":
                result.eval = "not run"
            else:
                status, notes, summary = run_eval(
                    env, env_dir, spec, args, workdir, environ, web_ui
                )
                result.eval, result.eval_summary = status, summary
                result.notes += notes
                if args.keep_logs:
                    keep = Path(args.keep_logs) / env
                    keep.mkdir(parents=True, exist_ok=True)
                    for name in ("eval.stderr", "policy.log", "traces.jsonl"):
                        if (workdir / name).exists():
                            (keep / name).write_text((workdir / name).read_text())
        finally:
            result.leftovers = sweep(env_dir, before)
    if result.leftovers:
        result.notes.append(
            "adapter?: left running after its runs (stopped now): "
            + "; ".join(result.leftovers)
        )
    return result
