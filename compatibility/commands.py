"""The commands the compatibility run types, as a user would: `openenv-v1 check
--json` and one eval, on whichever verifiers line is installed next to this Python
(0.2: `eval ... --taskset.*`; 0.4: `vf-eval ... --env.taskset.*`)."""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from compatibility.env_table import EnvSpec, step_timeout

__all__ = [
    "KEY_VAR",
    "LINE",
    "check_command",
    "eval_command",
    "find_python",
    "read_traces",
]

BIN = Path(sys.executable).parent
KEY_VAR = "LOCAL_POLICY_KEY"
LINE = "vf04" if int(version("verifiers").split(".")[1]) >= 4 else "vf02"
"""The verifiers line installed here: `vf02` or `vf04`."""


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


def _taskset_settings(
    env_dir: Path, spec: EnvSpec, args: argparse.Namespace, web_ui: bool
) -> list[tuple[bool, str, str]]:
    """The eval's taskset settings, each `(per_user, name, value)`: `per_user` ones sit
    under the user simulator's settings on 0.2 (`--taskset.task.user.*`); on 0.4 all
    are `--env.taskset.*`."""
    kwargs: dict[str, Any] = {"project_path": str(env_dir), **args.provider_kwargs}
    if env_vars := spec_env_vars(spec, env_dir):
        kwargs["env_vars"] = env_vars
    timeout = str(step_timeout(spec, args))
    settings = [
        (True, "provider-kwargs", j(kwargs)),
        (False, "resets", j([spec.reset])),
        (True, "launch-timeout-s", str(args.launch_timeout)),
        (True, "step-timeout-s", timeout),
        (True, "reset-timeout-s", timeout),
    ]
    if web_ui:
        settings.append((True, "server-web-ui", "true"))
    if args.docker:
        settings.append((False, "use-docker", "true"))
        if LINE != "vf04":
            settings.append((False, "docker-on-host", "true"))
    if args.provider:
        settings.append((False, "provider", args.provider))
    return settings


def eval_command(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    policy_url: str,
    out_dir: Path,
    args: argparse.Namespace,
    web_ui: bool,
) -> list[str]:
    """One rollout of `env` against the local policy at `policy_url`, written under
    `out_dir`, on this line's eval command."""
    settings = _taskset_settings(env_dir, spec, args, web_ui)
    if LINE == "vf04":
        cmd = [str(BIN / "vf-eval"), "openenv-v1", "--env.taskset.env", f"local/{env}"]
        for _, name, value in settings:
            cmd += [f"--env.taskset.{name}", value]
        cmd += ["-n", "1", "-r", "1", "--env.player.max-turns", str(spec.max_turns)]
    else:
        cmd = [str(BIN / "eval"), "openenv-v1", "--taskset.env", f"local/{env}"]
        for per_user, name, value in settings:
            scope = "taskset.task.user" if per_user else "taskset"
            cmd += [f"--{scope}.{name}", value]
        cmd += ["--harness.id", "null", "-n", "1", "-r", "1"]
        cmd += ["--max-turns", str(spec.max_turns)]
    cmd += ["--no-push", "--no-rich", "-o", str(out_dir)]
    cmd += ["-m", "local-policy", "--client.base-url", policy_url]
    cmd += ["--client.api-key-var", KEY_VAR]
    return cmd


def read_traces(out_dir: Path) -> list[dict[str, Any]]:
    """The rollouts' traces under `out_dir`, in 0.2's shape: on 0.4 each line is an
    episode (`traces`, `errors`), whose errors are added to its trace's (an episode
    that failed before its first turn has no trace: its errors stand alone)."""
    found: list[dict[str, Any]] = []
    for path in sorted(out_dir.rglob("traces.jsonl")):
        for line in path.read_text().splitlines():
            if not line:
                continue
            record = json.loads(line)
            if LINE == "vf02" or "traces" not in record:
                found.append(record)
                continue
            traces = record.get("traces") or [{}]
            for trace in traces:
                errors = list(record.get("errors") or ()) + list(
                    trace.get("errors") or ()
                )
                found.append({**trace, "errors": errors})
    return found
