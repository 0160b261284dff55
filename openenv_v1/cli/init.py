"""`openenv-v1 init NAME`: a wrapper package that pins one env as a taskset of its
own, for both verifiers lines from one source.

    openenv-v1 init my-wordle-v1 --project-path envs/wordle
    openenv-v1 init my-echo-v1 --base-url http://127.0.0.1:8000
    openenv-v1 init my-chess-v1 --env openenv/chess_env --app chess_env.server.app:app

It runs `openenv-v1 check --json` on the env (launched as a rollout launches it, or
at `--base-url`) and writes what that found as the package's defaults: the ASGI app
the launch chose, the env's own tasks when it serves OpenEnv's Task API (else one
empty reset), and an action the env accepts (built from its action schema or its
first MCP tool, then stepped by a second check). Into `./NAME` (`--dir` elsewhere),
which must not exist yet: `pyproject.toml`, the module (`my-wordle-v1` ->
`my_wordle_v1`, what `eval NAME` on verifiers 0.2 and `vf-eval NAME` on 0.4 load),
a README, and `tests/` (check, and one episode against the local scripted policy
through `openenv-v1 demo --taskset NAME`). Nothing is written when the check fails.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any

from openenv_v1.core.episode.schema_example import HIDDEN_FIELDS, example_object

NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
CHECK_TIMEOUT_S = 900.0
# template file -> where it goes in the package ({module}: the module's name)
_FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "__init__.py.tmpl": "{module}/__init__.py",
    "test_package.py.tmpl": "tests/test_{module}.py",
}


@dataclass(frozen=True)
class Findings:
    """What the package pins, from the env's check."""

    env: str | None
    base_url: str | None
    launch: dict[str, Any]
    resets: list[dict[str, Any]] | None
    reply: str
    notes: tuple[str, ...]
    """What was found, for the README."""


class InitError(Exception):
    """Why no package was written (shown as `openenv-v1 init: error: ...`)."""


def run_init(args: argparse.Namespace) -> int:
    try:
        root = _package_root(args.name, args.dir)
        findings = find_defaults(args)
        write_package(root, args.name, findings)
    except InitError as e:
        print(f"openenv-v1 init: error: {e}", file=sys.stderr)
        return 1
    module = module_name(args.name)
    print(
        f"wrote {root}: {module}/__init__.py ({'; '.join(findings.notes)}), "
        f"tests/test_{module}.py, README.md, pyproject.toml\n"
        f"next: uv pip install -e {root} && pytest {root}\n"
        f"      eval {args.name} -m <model> ...     (verifiers 0.2)\n"
        f"      vf-eval {args.name} -m <model> ...  (verifiers 0.4)"
    )
    return 0


def module_name(name: str) -> str:
    """The package's module: `my-wordle-v1` -> `my_wordle_v1`."""
    return name.replace("-", "_")


def _package_root(name: str, where: str | None) -> Path:
    if not NAME.fullmatch(name):
        raise InitError(
            f"NAME {name!r} must be lowercase letters, digits and single dashes, "
            "starting with a letter (e.g. my-wordle-v1): it is the package's name and "
            "the taskset id"
        )
    root = Path(where or ".").resolve() / name
    if root.exists():
        raise InitError(f"{root} exists: remove it, or give another NAME or --dir")
    return root


def find_defaults(args: argparse.Namespace) -> Findings:
    """Check the env once for what it serves, build an action from that, and check
    again stepping it: the action is one the env took."""
    where = _where(args)
    report = _check(where)
    reply = example_reply(report)
    stepped = _check([*where, "--action", reply])
    notes = [f"app {stepped['app']['app']}"] if stepped.get("app") else []
    tasks = (stepped.get("tasks") or {}).get("offered")
    notes.append("the env's own tasks (Task API)" if tasks else "one empty reset")
    notes.append("an MCP env" if stepped.get("tools") else "a text action")
    launch: dict[str, Any] = {}
    if not args.base_url:
        launch = dict(stepped["target"].get("provider_kwargs") or {})
        if stepped.get("app") and stepped["app"].get("app"):
            launch["app"] = stepped["app"]["app"]
    return Findings(
        env=None if args.base_url else stepped["target"]["env"],
        base_url=args.base_url,
        launch=launch,
        resets=None if tasks else [{}],
        reply=reply,
        notes=tuple(notes),
    )


def _where(args: argparse.Namespace) -> list[str]:
    if args.base_url:
        return ["--base-url", args.base_url]
    where = [args.env] if args.env else []
    if args.project_path:
        where += ["--project-path", str(Path(args.project_path).expanduser().resolve())]
    if args.app:
        where += ["--app", args.app]
    return where


def _check(where: list[str]) -> dict[str, Any]:
    """`openenv-v1 check --json` of `where`'s env; an `InitError` naming the stage
    and the cause when it fails."""
    run = "from openenv_v1.cli import main; main()"
    argv = [sys.executable, "-c", run, "check", *where]
    argv += ["--json", "--probe-sessions", "0"]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=CHECK_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise InitError(
            f"openenv-v1 check took over {CHECK_TIMEOUT_S:.0f} s; run it alone to see "
            "where it stops"
        ) from None
    try:
        report = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise InitError(
            f"openenv-v1 check gave no report (exit {done.returncode}): "
            f"{done.stderr.strip()[-2000:]}"
        ) from None
    if not report.get("ok"):
        failure = report.get("failure") or {}
        hint = f" ({failure['hint']})" if failure.get("hint") else ""
        raise InitError(
            f"the env failed `openenv-v1 check {' '.join(where)}` at its "
            f"{failure.get('stage')} stage: {failure.get('error')}{hint}"
        )
    return report


def example_reply(report: dict[str, Any]) -> str:
    """An action as a model would write it, from a check report: a call of the MCP
    env's first tool, the example text of a one-string action, else the example
    action as JSON (`{}` when the schema allows no example to be built)."""
    tools = report.get("tools") or []
    if tools:
        arguments = example_object(tools[0].get("input_schema") or {}) or {}
        call = {"type": "call_tool", "tool_name": tools[0]["name"]}
        return json.dumps({**call, "arguments": arguments})
    action = report.get("action") or {}
    example = example_object(action.get("schema") or {}) or {}
    example = {k: v for k, v in example.items() if k not in HIDDEN_FIELDS}
    field = action.get("raw_field")
    if field and isinstance(example.get(field), str):
        return example[field]
    return json.dumps(example)


def write_package(root: Path, name: str, findings: Findings) -> None:
    """The package's files under `root`, from the templates."""
    module = module_name(name)
    source = findings.env or findings.base_url or name
    values = {
        "name": name,
        "module": module,
        "prefix": "".join(part.capitalize() for part in module.split("_")),
        "source": f"The OpenEnv env `{source}`",
        "findings": "; ".join(findings.notes),
        "env": repr(findings.env),
        "base_url": repr(findings.base_url),
        "launch": repr(findings.launch),
        "resets": repr(findings.resets),
        "reply": repr(findings.reply),
    }
    templates = files("openenv_v1.cli") / "wrapper_template"
    for template, target in _FILES.items():
        text = Template((templates / template).read_text()).substitute(values)
        path = root / target.format(module=module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


__all__ = ["example_reply", "find_defaults", "module_name", "run_init", "write_package"]
