"""`openenv-v1 init NAME`: a wrapper package that pins one env as a taskset of its
own, for both verifiers lines from one source.

    openenv-v1 init my-wordle-v1 --project-path envs/wordle
    openenv-v1 init my-echo-v1 --base-url http://127.0.0.1:8000

It runs `openenv-v1 check --json` on the env and writes what that found as the
package's defaults (the app, the tasks `RESETS`, an action the env took `REPLY`)
into `./NAME` (`--dir` elsewhere), which must not exist yet, from
`wrapper_template/`. Nothing is written when the check fails.
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

from openenv_v1.core.episode.env_source import ResetParams, read_reset_params
from openenv_v1.core.episode.schema_example import (
    HIDDEN_FIELDS,
    example_object,
    example_objects,
)

NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
CHECK_TIMEOUT_S = 900.0
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
    """Check the env once for what it serves, then step the actions built from its
    schema in further checks until one is accepted on the package's first task."""
    where = _where(args)
    report = _run_check(where)
    if not report.get("ok"):
        raise InitError(_failed(where, report))
    resets = default_resets(report, _reset_params(args))
    first = ["--reset", json.dumps(resets[0])] if resets and resets[0] else []
    reply, stepped = accepted_reply([*where, *first], example_replies(report))
    notes = [f"app {stepped['app']['app']}"] if stepped.get("app") else []
    kind = _resets_kind(resets)
    notes.append(_RESETS_NOTES[kind].format(count=len(resets or ())))
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
        resets=resets,
        reply=reply,
        notes=tuple(notes),
    )


SEEDED_TASKS = 16


def default_resets(
    report: dict[str, Any], params: ResetParams | None
) -> list[dict[str, Any]] | None:
    """The package's tasks: None when the env serves OpenEnv's Task API (its own),
    `SEEDED_TASKS` seeded resets when its `reset` takes a `seed`, else one empty
    reset. `params`: the env's reset parameters, None without local source."""
    if (report.get("tasks") or {}).get("offered"):
        return None
    if takes_seed(report, params):
        return [{"seed": seed} for seed in range(SEEDED_TASKS)]
    return [{}]


def takes_seed(report: dict[str, Any], params: ResetParams | None) -> bool:
    """Whether the env's `reset` takes a `seed`: by its source when it has a `seed`
    parameter or no `**kwargs`, else by check's seed check (seeds honoured)."""
    if params is not None and "seed" in params.names:
        return True
    if params is not None and not params.any_keyword:
        return False
    return (report.get("seed_check") or {}).get("status") == "honoured"


def _reset_params(args: argparse.Namespace) -> ResetParams | None:
    if args.base_url or not args.project_path:
        return None
    folder = Path(args.project_path).expanduser()
    return read_reset_params(folder) if folder.is_dir() else None


def accepted_reply(where: list[str], replies: list[str]) -> tuple[str, dict[str, Any]]:
    """The first of `replies` that check's step accepts, and that check's report;
    an `InitError` naming each reply's failure when none is, or the stage and cause
    when the env fails elsewhere."""
    refused: list[str] = []
    for reply in replies:
        report = _run_check([*where, "--action", reply])
        if report.get("ok"):
            return reply, report
        if (report.get("failure") or {}).get("stage") != "step":
            raise InitError(_failed(where, report))
        refused.append(f"{reply!r}: {report['failure'].get('error')}")
    raise InitError(
        "the env's step took none of the actions built from its action schema: "
        + "; ".join(refused)
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


def _run_check(where: list[str]) -> dict[str, Any]:
    """The report of `openenv-v1 check --json` of `where`'s env, passed or failed;
    an `InitError` when it gives none."""
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
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        raise InitError(
            f"openenv-v1 check gave no report (exit {done.returncode}): "
            f"{done.stderr.strip()[-2000:]}"
        ) from None


def _failed(where: list[str], report: dict[str, Any]) -> str:
    failure = report.get("failure") or {}
    hint = f" ({failure['hint']})" if failure.get("hint") else ""
    return (
        f"the env failed `openenv-v1 check {' '.join(where)}` at its "
        f"{failure.get('stage')} stage: {failure.get('error')}{hint}"
    )


def example_replies(report: dict[str, Any]) -> list[str]:
    """Actions as a model would write them, in the order init tries them: one per
    example of the action schema (of an MCP env's first tool), its own examples
    first, `example_reply`'s last; `MAX_REPLIES` at most (each costs a launch)."""
    replies = [_as_reply(report, e) for e in example_objects(_acted_schema(report))]
    built = example_reply(report)
    given = [r for r in dict.fromkeys(replies) if r != built]
    return [*given[: MAX_REPLIES - 1], built]


MAX_REPLIES = 4


def example_reply(report: dict[str, Any]) -> str:
    """The action built from a check report's schema (`_as_reply`; `{}` when none
    can be built)."""
    return _as_reply(report, example_object(_acted_schema(report)) or {})


def _acted_schema(report: dict[str, Any]) -> dict[str, Any]:
    """The MCP env's first tool's input schema, else the action schema."""
    tools = report.get("tools") or []
    if tools:
        return dict(tools[0].get("input_schema") or {})
    return dict((report.get("action") or {}).get("schema") or {})


def _as_reply(report: dict[str, Any], example: dict[str, Any]) -> str:
    """`example` as a model writes it: a call of the MCP env's first tool, the text
    alone of a one-string action, else the action as JSON."""
    tools = report.get("tools") or []
    if tools:
        call = {"type": "call_tool", "tool_name": tools[0]["name"]}
        return json.dumps({**call, "arguments": example})
    example = {k: v for k, v in example.items() if k not in HIDDEN_FIELDS}
    field = (report.get("action") or {}).get("raw_field")
    if field and set(example) == {field} and isinstance(example[field], str):
        return example[field]
    return json.dumps(example)


def resets_source(resets: list[dict[str, Any]] | None) -> str:
    """`resets` as the module's source: seeds 0..n-1 as the comprehension a user
    edits, anything else as its repr."""
    count = len(resets or ())
    if count > 1 and resets == [{"seed": seed} for seed in range(count)]:
        return f'[{{"seed": i}} for i in range({count})]'
    return repr(resets)


def _resets_kind(resets: list[dict[str, Any]] | None) -> str:
    if resets is None:
        return "tasks"
    return "seeds" if any("seed" in r for r in resets) else "one"


_RESETS_NOTES = {
    "tasks": "the env's own tasks (Task API)",
    "seeds": "{count} seeded resets (its reset takes a seed)",
    "one": "one empty reset",
}
_EDIT = """Edit here: one dict of reset kwargs per task, or None for the env's own tasks
(OpenEnv's Task API), if it serves them."""
_RESETS_DOCS = {
    "tasks": """The tasks: None runs the env's own, from OpenEnv's Task API (check found
it). Edit here to run others instead: one dict of reset kwargs per task, e.g.
`[{"seed": i} for i in range(16)]`.""",
    "seeds": """The tasks, one per entry: the env's reset kwargs for each. Its `reset`
takes a `seed` (check found it), so each task is the game of one seed.
"""
    + _EDIT,
    "one": """The tasks, one per entry: the env's reset kwargs for each. check found no
`seed` that the env's `reset` takes, so there is one task: its default reset.
"""
    + _EDIT,
}


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
        "resets": resets_source(findings.resets),
        "resets_doc": _RESETS_DOCS[_resets_kind(findings.resets)],
        "reply": repr(findings.reply),
    }
    templates = files("openenv_v1.cli") / "wrapper_template"
    for template, target in _FILES.items():
        text = Template((templates / template).read_text()).substitute(values)
        path = root / target.format(module=module)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


__all__ = [
    "MAX_REPLIES",
    "SEEDED_TASKS",
    "accepted_reply",
    "default_resets",
    "example_replies",
    "example_reply",
    "find_defaults",
    "module_name",
    "run_init",
    "takes_seed",
    "resets_source",
    "write_package",
]
