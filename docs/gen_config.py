"""Write docs/configuration.md from the config classes' field docstrings.

    uv run python docs/gen_config.py                 # rewrite docs/configuration.md
    uv run python docs/gen_config.py --output F      # write F instead

The field docstrings are the one text of each setting (verifiers' CLI shows them as
`--help`); this page is generated from them, never edited by hand, and
`tests/test_config_doc.py` fails when it is out of date.

The classes are read from source with `ast`, not imported: the verifiers 0.4 config
imports verifiers 0.4, which cannot be installed beside verifiers 0.2 (the default
environment), so importing would need both environments. Reading source needs
neither, runs in any environment, and reads exactly the text `--help` shows. Types
and defaults are shown as written in the source (`Field(3, ge=1)` as `3`, `>= 1`).
Only the fields this package defines are listed; fields inherited from verifiers
(`id`, `runtime`, `colocated`, ...) are in `--help`.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import inspect
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "docs" / "configuration.md"
COMMAND = "uv run python docs/gen_config.py"


@dataclass(frozen=True)
class Setting:
    name: str
    type: str
    default: str
    constraint: str
    doc: str


@dataclass(frozen=True)
class Section:
    title: str
    source: str  # path from the repo root
    cls: str
    intro: str
    flags: tuple[tuple[str, str], ...]  # (column title, flag prefix)
    skip: frozenset[str] = frozenset()  # nested configs, documented as sections


SECTIONS = (
    Section(
        title="Env and servers (both lines)",
        source="openenv_v1/settings.py",
        cls="EnvSettings",
        intro=(
            "Which env, how it is reached, where its servers run and how the model "
            "acts. The taskset's own settings on both lines: `--taskset.*` (TOML "
            "`[taskset]`) on verifiers 0.2, `--env.taskset.*` (TOML `[env.taskset]`) "
            "on 0.4. `env` or `base_url` is required."
        ),
        flags=(
            ("verifiers 0.2 flag", "--taskset."),
            ("verifiers 0.4 flag", "--env.taskset."),
        ),
    ),
    Section(
        title="Episode settings (both lines)",
        source="openenv_v1/settings.py",
        cls="EpisodeSettings",
        intro=(
            "How a launched env server is set up, the limits of an episode, and how "
            "observations are shown. One definition for both lines: on verifiers 0.2 "
            "they belong to the per-rollout user simulator (`--taskset.task.user.*`, "
            "TOML `[taskset.task.user]`), on verifiers 0.4 to the taskset "
            "(`--env.taskset.*`, TOML `[env.taskset]`)."
        ),
        flags=(
            ("verifiers 0.2 flag", "--taskset.task.user."),
            ("verifiers 0.4 flag", "--env.taskset."),
        ),
    ),
    Section(
        title="Tasks (both lines)",
        source="openenv_v1/settings.py",
        cls="TaskSettings",
        intro=(
            "Where the tasks come from: `resets`, or the env's own tasks when its "
            "server offers OpenEnv's Task API (see [check.md](check.md), which lists "
            "an env's splits), and how the rollouts of one task start. The taskset's "
            "own settings on both lines: `--taskset.*` on verifiers 0.2, "
            "`--env.taskset.*` on 0.4."
        ),
        flags=(
            ("verifiers 0.2 flag", "--taskset."),
            ("verifiers 0.4 flag", "--env.taskset."),
        ),
    ),
    Section(
        title="Taskset, verifiers 0.2 (`eval`)",
        source="openenv_v1/vf02/config.py",
        cls="OpenEnvConfig",
        intro=(
            "Where verifiers 0.2's user simulators run and how they start: "
            "`--taskset.*`, TOML `[taskset]`, beside the env and task settings "
            "above. The episode settings above sit under `task.user`. On verifiers "
            "0.4 (`vf-eval`) every setting of the taskset is one of the sections "
            "above, under `--env.taskset.*` (TOML `[env.taskset]`)."
        ),
        flags=(("flag", "--taskset."),),
        skip=frozenset({"task"}),
    ),
    Section(
        title="User simulator, verifiers 0.2 (set by the taskset)",
        source="openenv_v1/vf02/config.py",
        cls="OpenEnvUserConfig",
        intro=(
            "`--taskset.task.user.*` holds the episode settings above, verifiers' "
            "own user settings (`runtime`, `colocated`, ...; see `--help`) and "
            "these two, which the taskset fills in."
        ),
        flags=(("flag", "--taskset.task.user."),),
    ),
    Section(
        title="Env, verifiers 0.4",
        source="openenv_v1/vf04/config.py",
        cls="OpenEnvEnvConfig",
        intro="The env's one role, under `--env.*` (TOML `[env]`).",
        flags=(("flag", "--env."),),
    ),
)

HEADER = f"""\
<!-- Generated by `{COMMAND}` from the config classes' field docstrings.
     Do not edit: change the docstring, then run the command. -->

# Configuration reference

Every setting of the `openenv-v1` taskset, from the field docstrings of its config
classes (the same text `--help` shows). Flags take the field name with `-` for `_`;
TOML files use the name as it is. Values of `dict` and `list` settings are JSON on the
command line (`--taskset.resets '[{{"seed": 1}}]'`).

`eval @ file.toml` (verifiers 0.2) or `vf-eval @ file.toml` (verifiers 0.4) runs a
whole config; flags after it override the file. `configs/wordle-local.toml` (offline
Wordle, UV launch) and `configs/base-url.toml` (any running server) are ready to use;
`configs/vf04/` holds the same two for verifiers 0.4
(`uv run --no-sync vf-eval @ configs/vf04/wordle-local.toml`). See
[verifiers-0.4.md](verifiers-0.4.md) for how the two lines' flags and tables differ.

Only the settings this package defines are listed; verifiers' own (`-m`, `-n`, `-r`,
`--client.*`, `--harness.*`, `task.user.runtime`, `task.user.colocated`, ...) are in
`uv run eval openenv-v1 --help`.
"""


def literal_aliases(package: Path) -> dict[str, str]:
    """Module-level `Name = Literal[...]` aliases of the package, as `"a" | "b"`, so
    a setting typed `ObservationFormat` shows its values."""
    aliases = {}
    for path in sorted(package.rglob("*.py")):
        for stmt in ast.parse(path.read_text(), filename=str(path)).body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Subscript)
                and ast.unparse(stmt.value.value) == "Literal"
            ):
                values = ast.literal_eval(stmt.value.slice)
                values = values if isinstance(values, tuple) else (values,)
                aliases[stmt.targets[0].id] = " | ".join(json.dumps(v) for v in values)
    return aliases


def read_settings(source: Path, cls: str) -> list[Setting]:
    """The annotated fields of class `cls` in `source` (a `ClassVar` is none), each
    with the string literal that follows it (its docstring), in source order."""
    tree = ast.parse(source.read_text(), filename=str(source))
    node = next(
        (n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None
    )
    if node is None:
        raise SystemExit(f"gen_config: no class {cls} in {source}")
    settings = []
    body = node.body
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if ast.unparse(stmt.annotation).startswith("ClassVar["):
            continue  # not a field: the class's own (`EnvSettings.surface`)
        after = body[i + 1] if i + 1 < len(body) else None
        if not (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            raise SystemExit(
                f"gen_config: {source}:{stmt.lineno} {cls}.{stmt.target.id} has no "
                "docstring; every setting needs one (it is its --help text)"
            )
        default, constraint = _default(stmt.value)
        settings.append(
            Setting(
                name=stmt.target.id,
                type=ast.unparse(stmt.annotation),
                default=default,
                constraint=constraint,
                doc=" ".join(inspect.cleandoc(after.value.value).split()),
            )
        )
    return settings


@functools.cache
def constants(package: Path = ROOT / "openenv_v1") -> dict[str, ast.expr]:
    """The package's module-level `NAME = <literal>` constants, so that a default
    written as one (`LAUNCH_TIMEOUT_S`) is shown as its value."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        for stmt in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(stmt, ast.Assign):
                target, value = stmt.targets[0], stmt.value
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                target, value = stmt.target, stmt.value
            else:
                continue
            if isinstance(target, ast.Name):
                with contextlib.suppress(ValueError):
                    ast.literal_eval(value)
                    found[target.id] = value
    return found


def _shown(value: ast.expr) -> str:
    """A default as a user writes it: JSON for literals (`true`, `"text"`), `unset`
    for None, the source text otherwise."""
    if isinstance(value, ast.Name):
        value = constants().get(value.id, value)
    if isinstance(value, ast.Call) and not value.args and not value.keywords:
        empty = {"dict": "{}", "list": "[]"}.get(ast.unparse(value.func))
        if empty:
            return empty
    try:
        literal = ast.literal_eval(value)
    except ValueError:
        return ast.unparse(value)
    return "unset" if literal is None else json.dumps(literal)


def _default(value: ast.expr | None) -> tuple[str, str]:
    """The default as written, and any bound (`ge`, `le`, ...) given to `Field`."""
    if value is None:
        return "required", ""
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "Field"
    ):
        return _shown(value), ""
    default = "required"
    if value.args:
        default = _shown(value.args[0])
    bounds = {">=": "ge", ">": "gt", "<=": "le", "<": "lt"}
    constraint = []
    for kw in value.keywords:
        if kw.arg == "default":
            default = _shown(kw.value)
        elif kw.arg == "default_factory":
            factory = kw.value
            default = (
                _shown(factory.body)
                if isinstance(factory, ast.Lambda)
                else _shown(ast.Call(func=factory, args=[], keywords=[]))
            )
        for sign, arg in bounds.items():
            if kw.arg == arg:
                constraint.append(f"{sign} {ast.unparse(kw.value)}")
    return default, ", ".join(constraint)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _expand(annotation: str, aliases: dict[str, str]) -> str:
    """`annotation` with each alias in it (`ProviderName | None`) shown as its
    values."""
    return re.sub(r"\b\w+\b", lambda m: aliases.get(m.group(0), m.group(0)), annotation)


def render_section(section: Section, root: Path, aliases: dict[str, str]) -> str:
    settings = [
        s
        for s in read_settings(root / section.source, section.cls)
        if s.name not in section.skip
    ]
    titles = ["setting", *(title for title, _ in section.flags), "type", "default"]
    lines = [
        f"## {section.title}",
        "",
        f"`{section.cls}` in `{section.source}`. {section.intro}",
        "",
        "| " + " | ".join(titles) + " | what it does |",
        "|" + "---|" * (len(titles) + 1),
    ]
    for s in settings:
        flag = s.name.replace("_", "-")
        default = s.default if s.default == "unset" else f"`{s.default}`"
        default += f" ({s.constraint})" if s.constraint else ""
        cells = [
            f"`{s.name}`",
            *(f"`{prefix}{flag}`" for _, prefix in section.flags),
            f"`{_cell(_expand(s.type, aliases))}`",
            _cell(default),
            _cell(s.doc),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def render(root: Path = ROOT) -> str:
    aliases = literal_aliases(root / "openenv_v1")
    return "\n".join([HEADER, *(render_section(s, root, aliases) for s in SECTIONS)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    args.output.write_text(render())
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
