"""Running one env: its recipe prepared, `openenv-v1 check --json`, then one real eval
against the local policy in script mode, and the sweep for what was left running."""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from compatibility import recipes
from compatibility.causes import classify
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
    rounded,
    short_error,
    summarize_check,
)

__all__ = ["run_env"]

BIN = Path(sys.executable).parent
KEY_VAR = "LOCAL_POLICY_KEY"


def j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def spec_env_vars(spec: EnvSpec, env_dir: Path) -> dict[str, str]:
    return {k: v.replace("{env}", str(env_dir)) for k, v in spec.env_vars.items()}


def find_python(env_dir: Path) -> str | None:
    """An installed interpreter meeting the env's requires-python when this one does
    not (uv looks on PATH only, and downloads otherwise: not here)."""
    from packaging.specifiers import SpecifierSet

    try:
        data = tomllib.loads((env_dir / "pyproject.toml").read_text())
        needs = SpecifierSet(data["project"]["requires-python"])
    except (OSError, KeyError, tomllib.TOMLDecodeError, ValueError):
        return None
    here = ".".join(map(str, sys.version_info[:3]))
    if here in needs:
        return None
    candidates = glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python3"))
    candidates += glob.glob("/usr/bin/python3.*[0-9]") + glob.glob(
        "/usr/local/bin/python3.*[0-9]"
    )
    for path in sorted(candidates, reverse=True):
        version = subprocess.run(
            [path, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if version and version in needs:
            return path
    return None


def check_command(
    env_dir: Path, spec: EnvSpec, args: argparse.Namespace, web_ui: bool
) -> list[str]:
    cmd = [str(BIN / "openenv-v1"), "check", "--project-path", str(env_dir), "--json"]
    cmd += ["--reset", j(spec.reset), "--probe-sessions", "1"]
    cmd += ["--timeout", str(step_timeout(spec, args))]
    cmd += ["--launch-timeout", str(args.launch_timeout)]
    if spec.action is not None:
        cmd += ["--action", spec.action]
    kwargs = dict(args.provider_kwargs)
    if env_vars := spec_env_vars(spec, env_dir):
        kwargs["env_vars"] = env_vars
    if kwargs:
        cmd += ["--provider-kwargs", j(kwargs)]
    if web_ui:
        cmd.append("--web-ui")
    if args.docker:
        cmd.append("--use-docker")
    if args.provider:
        cmd += ["--provider", args.provider]
    return cmd


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


def eval_command(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    policy_url: str,
    out_dir: Path,
    args: argparse.Namespace,
    web_ui: bool,
) -> list[str]:
    kwargs: dict[str, Any] = {"project_path": str(env_dir), **args.provider_kwargs}
    if env_vars := spec_env_vars(spec, env_dir):
        kwargs["env_vars"] = env_vars
    cmd = [str(BIN / "eval"), "openenv-v1", "--taskset.env", f"local/{env}"]
    cmd += ["--taskset.task.user.provider-kwargs", j(kwargs)]
    cmd += ["--taskset.resets", j([spec.reset])]
    cmd += ["--taskset.task.user.launch-timeout-s", str(args.launch_timeout)]
    cmd += ["--taskset.task.user.step-timeout-s", str(step_timeout(spec, args))]
    cmd += ["--taskset.task.user.reset-timeout-s", str(step_timeout(spec, args))]
    if web_ui:
        cmd += ["--taskset.task.user.server-web-ui", "true"]
    if args.docker:
        cmd += ["--taskset.use-docker", "true", "--taskset.docker-on-host", "true"]
    if args.provider:
        cmd += ["--taskset.provider", args.provider]
    cmd += ["--harness.id", "null", "-n", "1", "-r", "1"]
    cmd += ["--max-turns", str(spec.max_turns)]
    cmd += ["--no-push", "--no-rich", "-o", str(out_dir)]
    cmd += ["-m", "local-policy", "--client.base-url", policy_url]
    cmd += ["--client.api-key-var", KEY_VAR]
    return cmd


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
    traces = []
    for path in sorted(out_dir.rglob("traces.jsonl")):
        traces += [json.loads(ln) for ln in path.read_text().splitlines() if ln]
    (workdir / "eval.stderr").write_text(err)
    with contextlib.suppress(OSError):
        (workdir / "traces.jsonl").write_text("".join(j(t) + "\n" for t in traces))
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
        "reward": rounded((trace.get("rewards") or {}).get("openenv_reward")),
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
    if spec.note:
        result.notes.append(spec.note)
    environ = dict(os.environ)
    with recipes.prepared(env, env_dir) as extra:
        spec = replace(spec, env_vars={**spec.env_vars, **extra.env_vars})
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
