"""The package's import graph keeps the shape `docs/layout.md` describes.

Every `import` and `from ... import` statement of every module under `openenv_v1/`
counts, wherever it stands (module level, inside a function, under
`if TYPE_CHECKING:`): a deferred import is still a dependency. The graph is read with
`ast` from the source; nothing is imported.

- no circle of imports among the package's modules (`KNOWN_CYCLES` lists the two-file
  circle left to undo, each with its reason; one that disappears must leave the list);
- `openenv_v1.core` never imports verifiers, nor a verifiers binding;
- `core/launch/` never imports `core/episode/`, and `core/episode/` reaches
  `core/launch/` only to open an episode's client (`env_episode.open_episode` ->
  `launch.target.open_env`; `EnvTarget` as a type only);
- `vf02/simulator/` imports nothing of the binding around it (the fork server runs
  the user simulator's module by name);
- no file of `openenv_v1/core/` spells a binding's path for a setting, not even in a
  docstring: each binding's `flags.py` does (`core.setting_names`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import openenv_v1

PACKAGE_DIR = Path(openenv_v1.__file__).parent
CORE, LAUNCH, EPISODE = (
    "openenv_v1.core",
    "openenv_v1.core.launch",
    "openenv_v1.core.episode",
)

KNOWN_CYCLES: dict[frozenset[str], str] = {
    frozenset({"openenv_v1.core.light_import", "openenv_v1.core.openenv_lines"}): (
        "light_import's generic_client_class defers the import of openenv_lines, "
        "which hides gradio with light_import.without_gradio"
    ),
}
"""Circles still in the tree, to be undone; a new one fails the test."""


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    names: tuple[str, ...]
    """The names a `from ... import` takes (empty for `import x`)."""
    line: int
    type_only: bool
    """Under `if TYPE_CHECKING:`."""

    def __str__(self) -> str:
        where = self.source.replace(".", "/") + f".py:{self.line}"
        return f"{where} imports {self.target}" + (
            f" ({', '.join(self.names)})" if self.names else ""
        )


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = ["openenv_v1", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The package module `name` loads: itself, or the nearest package above it
    (`openenv_v1.core.EnvTarget` -> `openenv_v1.core`); None outside the package."""
    while name not in known:
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return name


def imports(known: dict[str, Path]) -> list[Import]:
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        type_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If)
            and ast.unparse(node.test).split(".")[-1] == "TYPE_CHECKING"
            for inner in ast.walk(node)
        }
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[tuple[str, tuple[str, ...]]] = []
            if isinstance(node, ast.Import):
                targets = [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = module.split(".")[: None if is_package else -1]
                    parts = parts[: len(parts) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in node.names:
                    # `from pkg import submodule` loads the submodule.
                    sub = f"{base}.{alias.name}"
                    targets.append((sub if sub in known else base, (alias.name,)))
            for name, names in targets:
                target = _resolve(name, known)
                if target is not None and target != module:
                    found.append(
                        Import(
                            module, target, names, node.lineno, id(node) in type_only
                        )
                    )
    return found


def cycles(edges: list[Import]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


EDGES = imports(modules())


def test_the_reader_sees_imports_at_every_level():
    """The graph holds a module-level, a function-level and a TYPE_CHECKING import
    that the package is known to have (so an empty graph cannot pass)."""
    by_pair = {(e.source, e.target): e for e in EDGES}
    top = by_pair[("openenv_v1.vf02.user", "openenv_v1.vf02.account")]
    deferred = by_pair[
        ("openenv_v1.core.light_import", "openenv_v1.core.openenv_lines")
    ]
    typed = by_pair[("openenv_v1.vf02.account", "openenv_v1.vf02.state")]
    assert not top.type_only and not deferred.type_only and typed.type_only
    assert cycles(
        [Import("a", "b", (), 1, False), Import("b", "c", (), 1, False)]
        + [Import("c", "a", (), 1, True), Import("c", "d", (), 1, False)]
    ) == [frozenset({"a", "b", "c"})]


def test_no_import_cycle():
    found = cycles(EDGES)
    new = [c for c in found if c not in KNOWN_CYCLES]
    described = [
        "\n".join(
            ["circle: " + " <-> ".join(sorted(c))]
            + [f"  {e}" for e in EDGES if e.source in c and e.target in c]
        )
        for c in new
    ]
    assert not new, "\n".join(described)
    gone = [" <-> ".join(sorted(c)) for c in KNOWN_CYCLES if c not in found]
    assert not gone, f"no longer a circle, remove from KNOWN_CYCLES: {gone}"


def test_core_never_imports_verifiers_or_a_binding():
    offending = []
    for module, path in modules().items():
        if not _within(module, CORE):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offending += [
                f"{module}:{node.lineno} imports {name}"
                for name in names
                if name.split(".")[0] == "verifiers"
            ]
    offending += [
        str(e)
        for e in EDGES
        if _within(e.source, CORE)
        and (
            _within(e.target, "openenv_v1.vf02") or _within(e.target, "openenv_v1.vf04")
        )
    ]
    assert not offending, "\n".join(offending)


def test_launch_never_imports_episode():
    offending = [
        str(e)
        for e in EDGES
        if _within(e.source, LAUNCH) and _within(e.target, EPISODE)
    ]
    assert not offending, "\n".join(offending)


def test_the_simulator_machinery_imports_nothing_of_the_binding():
    simulator = "openenv_v1.vf02.simulator"
    offending = [
        str(e)
        for e in EDGES
        if _within(e.source, simulator)
        and _within(e.target, "openenv_v1.vf02")
        and not _within(e.target, simulator)
    ]
    assert not offending, "\n".join(offending)


def test_episode_reaches_launch_only_to_open_an_episode():
    allowed = {
        ("openenv_v1.core.episode.env_episode", "open_env", False),
        ("openenv_v1.core.episode.env_episode", "EnvSession", False),
        ("openenv_v1.core.episode.resume", "server_lost", False),
    }
    offending = [
        str(e)
        for e in EDGES
        if _within(e.source, EPISODE)
        and _within(e.target, LAUNCH)
        and not (
            e.target == "openenv_v1.core.launch.target"
            and all(
                (e.source, name, e.type_only) in allowed
                or (name == "EnvTarget" and e.type_only)
                for name in e.names
            )
            and e.names
        )
    ]
    assert not offending, "\n".join(offending)


BINDING_PATHS = re.compile(r"task\.user\.|--taskset\.|--env\.taskset")
"""How verifiers 0.2 and 0.4 spell a setting (`vf02/flags.py`, `vf04/flags.py`)."""


def test_core_spells_no_bindings_path_for_a_setting():
    core = [
        path
        for path in sorted((PACKAGE_DIR / "core").rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    ]
    offending = [
        f"{path.relative_to(PACKAGE_DIR.parent)}:{number}: {line.strip()}"
        for path in core
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if BINDING_PATHS.search(line)
    ]
    assert core and not offending, "\n".join(offending)
