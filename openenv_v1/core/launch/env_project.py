"""What an env project's own files say about serving it: app, gradio, Python.

An OpenEnv env is a uv project laid out like its Hugging Face Space. Its ASGI app is
named in up to three places, which real envs do not keep consistent:

- `[project.scripts] server = "<pkg>.server.app:main"` in `pyproject.toml`: the module
  its Dockerfile and `uv run server` use; it imports the installed package, so it also
  works where `server/` uses relative imports (`from ..models import ...`);
- `app:` in `openenv.yaml` (often `server.app:app`, importable only with the env's
  folder on the import path);
- OpenEnv's default, `server.app:app`.

`app_candidates()` lists them in that order (plus `<pkg>.server.app:app` for a package
folder that has one), each with the reason it was chosen; the launcher tries them in
turn while the previous one cannot be imported. The project also says whether it
declares gradio (`declares_gradio`) and which Python it needs (`python_requirement`).

    project = EnvProject.read("envs/echo_env")
    project.app_candidates()[0]   # AppChoice("echo_env.server.app:app", "[project.scripts] server ...")
"""

from __future__ import annotations

import contextlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

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
    """The facts of one env project folder; missing or unreadable files read as
    absent."""

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
        """Whether `[project] dependencies` lists gradio (extras do not count: they
        are not installed by a plain launch)."""
        deps = self.pyproject.get("project", {}).get("dependencies") or []
        return any(_requirement_name(dep) == "gradio" for dep in deps)

    @property
    def python_requirement(self) -> str | None:
        """The Python the project asks for, with where it says so:
        `>=3.12 (requires-python in pyproject.toml)`, or a `.python-version` pin."""
        parts = []
        with contextlib.suppress(OSError):
            pin = (self.path / ".python-version").read_text().strip().splitlines()
            if pin and pin[0].strip():
                parts.append(f"{pin[0].strip()} (.python-version)")
        spec = self.pyproject.get("project", {}).get("requires-python")
        if spec:
            parts.append(f"{spec} (requires-python in pyproject.toml)")
        return ", ".join(parts) or None

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
