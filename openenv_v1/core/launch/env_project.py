"""What an env project's own files say about serving it: app, gradio, Python, and
the variables its server reads.

An env's ASGI app is named in `[project.scripts] server` of `pyproject.toml` (it
imports the installed package, so relative imports work), `app:` in `openenv.yaml`,
or OpenEnv's default `server.app:app`, which real envs do not keep consistent:
`app_candidates()` lists them in that order, each with why. `variables()` are what no
endpoint publishes: the variables the server reads by a literal name that look like
credentials, or are read without a default and named in `.env.example`,
`openenv.yaml` or the README (E2B envs end every episode at `reset` without
`E2B_API_KEY`). `forward_advice` says to forward those a launch lacks. Only the env's
files are read, never anyone's environment.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tomllib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.setting_names import setting

DEFAULT_APP = "server.app:app"


@dataclass(frozen=True)
class AppChoice:
    """An ASGI app to serve (`module:attribute`) and why it was chosen."""

    app: str
    source: str

    @property
    def module(self) -> str:
        return self.app.partition(":")[0]


@dataclass(frozen=True)
class EnvProject:
    """One env project folder; missing or unreadable files read as absent."""

    path: Path
    pyproject: dict[str, Any] = field(default_factory=dict, repr=False)
    manifest: dict[str, Any] = field(default_factory=dict, repr=False)
    """`openenv.yaml`."""

    @classmethod
    def read(cls, path: str | Path) -> EnvProject:
        root = Path(path)
        pyproject: dict[str, Any] = {}
        with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
            pyproject = tomllib.loads((root / "pyproject.toml").read_text())
        return cls(root, pyproject, _read_manifest(root / "openenv.yaml"))

    @property
    def name(self) -> str:
        return str(self.pyproject.get("project", {}).get("name") or self.path.name)

    @property
    def declares_gradio(self) -> bool:
        """Whether `[project] dependencies` lists gradio (extras are not installed)."""
        deps = self.pyproject.get("project", {}).get("dependencies") or []
        return any(_requirement_name(dep) == "gradio" for dep in deps)

    @property
    def python_requirement(self) -> str | None:
        """The Python the project asks for and where: `>=3.12 (requires-python in
        pyproject.toml)`, a `.python-version` pin."""
        parts = []
        with contextlib.suppress(OSError):
            pin = (self.path / ".python-version").read_text().strip().splitlines()
            if pin and pin[0].strip():
                parts.append(f"{pin[0].strip()} (.python-version)")
        spec = self.pyproject.get("project", {}).get("requires-python")
        if spec:
            parts.append(f"{spec} (requires-python in pyproject.toml)")
        return ", ".join(parts) or None

    def variables(self) -> tuple[EnvVariable, ...]:
        """The variables its server needs, credentials first; read once per folder."""
        return _variables(str(self.path.resolve()))

    def app_candidates(self) -> list[AppChoice]:
        """The apps to try, most specific first, without repeats."""
        found: list[AppChoice] = []
        scripts = self.pyproject.get("project", {}).get("scripts") or {}
        for name, target in _server_scripts(scripts):
            module = str(target).partition(":")[0].strip()
            found.append(
                AppChoice(
                    f"{module}:app",
                    f"[project.scripts] {name} = {target!r} in pyproject.toml",
                )
            )
        if isinstance(app := self.manifest.get("app"), str) and ":" in app:
            found.append(AppChoice(app.strip(), "`app` in openenv.yaml"))
        for package in sorted(self.path.glob("*/server/app.py")):
            pkg = package.parent.parent.name
            if (package.parent.parent / "__init__.py").is_file():
                found.append(
                    AppChoice(f"{pkg}.server.app:app", f"found {pkg}/server/app.py")
                )
        if (self.path / "server" / "app.py").is_file():
            found.append(AppChoice(DEFAULT_APP, "OpenEnv's default app"))
        unique: dict[str, AppChoice] = {}
        for choice in found:
            unique.setdefault(choice.app, choice)
        return list(unique.values())


def _server_scripts(scripts: dict[str, Any]) -> list[tuple[str, str]]:
    """Console scripts that start the env server: `server` first, then any other
    whose module is a `server.app` module."""
    named = [(n, t) for n, t in scripts.items() if n == "server"]
    others = [
        (n, t)
        for n, t in scripts.items()
        if n != "server" and str(t).partition(":")[0].strip().endswith("server.app")
    ]
    return [(n, str(t)) for n, t in named + others if ":" in str(t)]


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        import yaml

        data = yaml.safe_load(path.read_text())
    except Exception:  # absent, unreadable or not YAML: no manifest
        return {}
    return data if isinstance(data, dict) else {}


def _requirement_name(requirement: Any) -> str:
    try:
        return canonicalize_name(Requirement(str(requirement)).name)
    except InvalidRequirement:
        return ""


@dataclass(frozen=True)
class EnvVariable:
    """A variable of the server's environment that an env folder's files name."""

    name: str
    read_in: tuple[str, ...]
    """The Python files that read it (relative to the folder)."""
    listed_in: tuple[str, ...] = ()
    """`.env.example`, `openenv.yaml`, the README: where else the env names it."""
    credential: bool = False
    """Its name looks like a credential's (`credential_name`)."""

    @property
    def where(self) -> str:
        """`read in server/env.py; listed in .env.example`."""
        parts = [f"read in {', '.join(self.read_in)}"]
        if self.listed_in:
            parts.append(f"listed in {', '.join(self.listed_in)}")
        return "; ".join(parts)


_CREDENTIAL_PARTS = frozenset(
    {"KEY", "KEYS", "APIKEY", "TOKEN", "TOKENS", "SECRET", "SECRETS", "PASSWORD"}
    | {"PASSWD", "CREDENTIAL", "CREDENTIALS"}
)


def local_folder(project_path: str | None, fix: str) -> str | None:
    """The local env folder `project_path` names; None when unset or a `git+` URL.
    Raises `EnvFailure` for a path that is no folder, saying to set it to `fix`."""
    if not project_path or project_path.startswith("git+"):
        return None
    if not os.path.isdir(project_path):
        raise EnvFailure(
            f"project_path {project_path!r} is not a directory; set "
            f"{setting('provider_kwargs.project_path')} to {fix}"
        )
    return project_path


def credential_name(name: str) -> bool:
    """Whether one of the `_` parts of `name` is `KEY`, `TOKEN`, `SECRET` or the like
    (not `PWD`, the shell's working directory)."""
    return any(part in _CREDENTIAL_PARTS for part in name.upper().split("_"))


def passed_variables(
    provider_kwargs: Mapping[str, Any], forward_env: Collection[str]
) -> frozenset[str]:
    """The names a launch sets: `forward_env` and `provider_kwargs.env_vars`' keys."""
    env_vars = provider_kwargs.get("env_vars")
    given = set(env_vars) if isinstance(env_vars, Mapping) else set()
    return frozenset(given | set(forward_env))


def lacking_variables(
    source_dir: str | os.PathLike[str] | None, passed: Collection[str]
) -> tuple[EnvVariable, ...]:
    """The variables `source_dir` needs that `passed` lacks; none without a folder."""
    if source_dir is None:
        return ()
    found = _variables(str(Path(source_dir).resolve()))
    return tuple(v for v in found if v.name not in passed)


def forward_advice(lacking: Sequence[EnvVariable]) -> str:
    """What to do about `lacking`, for a failure's text: each variable, where the
    env names it, and the `forward_env` setting; '' when nothing lacks."""
    if not lacking:
        return ""
    names = [v.name for v in lacking]
    each = "; ".join(f"{v.name} ({v.where})" for v in lacking)
    them = "it" if len(names) == 1 else "each"
    return (
        f"the env's own files say it reads {each}, which this launch does not pass "
        f"to its server: set {them} in your environment and forward "
        f"{'it' if len(names) == 1 else 'them'} by name with {setting('forward_env')} "
        f"({', '.join(names)})"
    )


def named_in(text: str, lacking: Sequence[EnvVariable]) -> list[EnvVariable]:
    """The variables of `lacking` that `text` names (as a whole word)."""
    return [v for v in lacking if re.search(rf"\b{re.escape(v.name)}\b", text)]


def explain_lacking(
    text: str,
    at_reset: bool,
    *,
    source_dir: str | os.PathLike[str] | None,
    passed: Collection[str],
) -> str:
    """`text`, a failure, with `forward_advice` for the lacking variables: all of
    them for a reset that left no episode (`at_reset`: its reason may be lost),
    else those `text` names."""
    lacking = lacking_variables(source_dir, passed)
    if not at_reset:
        lacking = tuple(named_in(text, lacking))
    return f"{text}. {forward_advice(lacking)}" if lacking else text


# `os.environ["X"]`, `environ.get("X"[, default])`, `os.getenv("X"[, default])`; the
# character after the name tells a read with a default (`,`) from one without.
_NAME = r"""["'](?P<name>[A-Za-z_][A-Za-z0-9_]*)["']\s*(?P<after>[,)\]])"""
_READS = re.compile(
    rf"(?:\benviron\s*\[\s*|\benviron\s*\.\s*get\s*\(\s*|\bgetenv\s*\(\s*){_NAME}"
)
_ASSIGNED = re.compile(r"\s*=(?!=)")
_LISTS = (".env.example", "openenv.yaml", "README.md")
# Not the server's code: tests, examples, scripts; and `client.py`, OpenEnv's client
# side (it runs in the user's process, not the server's).
_SKIP_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "venv", "tests", "examples"}
    | {"scripts", "docs"}
)
_SKIP_FILES = frozenset({"client.py"})
_MAX_FILES = 500
_MAX_BYTES = 1_000_000


@functools.lru_cache(maxsize=32)
def _variables(root_text: str) -> tuple[EnvVariable, ...]:
    root = Path(root_text)
    reads: dict[str, list[str]] = {}
    required: set[str] = set()
    for path in _python_files(root):
        for name, has_default in _reads(path):
            where = reads.setdefault(name, [])
            if (rel := str(path.relative_to(root))) not in where:
                where.append(rel)
            if not has_default:
                required.add(name)
    listed = {name: _listed_in(root, name) for name in reads}
    found = [
        EnvVariable(name, tuple(files), listed[name], credential_name(name))
        for name, files in reads.items()
        if credential_name(name) or (listed[name] and name in required)
    ]
    return tuple(sorted(found, key=lambda v: (not v.credential, v.name)))


def _reads(path: Path) -> Iterator[tuple[str, bool]]:
    """Each literal variable name `path` reads, and whether that read has a default
    (`os.environ[...]` has none; `get(name, None)` counts as one)."""
    try:
        text = path.read_bytes()[:_MAX_BYTES].decode("utf-8", errors="replace")
    except OSError:
        return
    for m in _READS.finditer(text):
        if m["after"] == "]" and _ASSIGNED.match(text, m.end()):
            continue  # `os.environ["X"] = ...` sets it
        yield m["name"], m["after"] == ","


@functools.lru_cache(maxsize=32)
def _listing_texts(root_text: str) -> tuple[tuple[str, str], ...]:
    texts = []
    for name in _LISTS:
        with contextlib.suppress(OSError):
            texts.append((name, (Path(root_text) / name).read_text(errors="replace")))
    return tuple(texts)


def _listed_in(root: Path, name: str) -> tuple[str, ...]:
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")
    return tuple(f for f, text in _listing_texts(str(root)) if word.search(text))


def _python_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
        )
        found += [
            Path(dirpath, f)
            for f in sorted(filenames)
            if f.endswith(".py") and f not in _SKIP_FILES
        ]
        if len(found) >= _MAX_FILES:
            break
    return found[:_MAX_FILES]
