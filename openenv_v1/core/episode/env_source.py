"""What the env's local source says: where it is, and what its `reset` takes.

OpenEnv's server drops reset kwargs its env's `reset` does not take, and publishes
that signature nowhere, so `read_reset_params` reads it from the source when local.
"""

from __future__ import annotations

import ast
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv_v1.core.manifest import local_project_dir

if TYPE_CHECKING:
    from openenv_v1.core.launch.target import EnvTarget

# OpenEnv's env base classes: the server inspects `reset` (or `reset_async`, when
# overridden) of the env class built on them (`HTTPEnvServer._get_valid_kwargs`).
_ENV_BASES = frozenset({"Environment", "MCPEnvironment"})
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv"})
_MAX_SOURCE_FILES = 500


@dataclass(frozen=True)
class ResetParams:
    """The keyword arguments an env's `reset` takes, as read from its source."""

    names: frozenset[str]
    any_keyword: bool
    """`reset` takes `**kwargs`: every key reaches the env."""
    where: str
    """The method(s) read: `WordleEnvironment.reset in server/env.py`."""

    def unknown(self, kwargs: dict[str, Any]) -> list[str]:
        """Keys of `kwargs` the server drops before calling `reset`."""
        return [] if self.any_keyword else [k for k in kwargs if k not in self.names]

    def unknown_note(self, keys: list[str], share: str = "") -> str:
        """What is said of `keys` the env's `reset` does not take (`share`: how many
        resets had them)."""
        many = len(keys) > 1
        return (
            f"reset kwarg{'s' if many else ''} {', '.join(repr(k) for k in keys)}"
            f"{share} {'are not parameters' if many else 'is not a parameter'} of "
            f"the env's reset ({self.where}); OpenEnv drops "
            f"{'them' if many else 'it'} without telling the env"
        )


def read_reset_params(source_dir: str | os.PathLike[str]) -> ResetParams | None:
    """The reset parameters of the env classes under `source_dir` (subclasses of
    OpenEnv's `Environment` / `MCPEnvironment`, directly or not), merged; None when
    no env class with a `reset` is found. Every episode asks, so the answer is kept
    per state of the source files, looked at again only `RESET_PARAMS_RECHECK_S`
    after the last look; one tree is parsed at a time (CPython 3.11's `ast` is not
    thread-safe)."""
    recent = recent_reset_params(source_dir)
    if recent is not None:
        return recent[0]
    root = Path(source_dir)
    files = python_files(root)
    key = (str(root.resolve()), tuple(_file_stamp(path) for path in files))
    with _reset_params_lock:
        if key not in _reset_params_cache:
            if len(_reset_params_cache) >= _RESET_PARAMS_CACHE_SIZE:
                _reset_params_cache.clear()
                _reset_params_recent.clear()
            _reset_params_cache[key] = _parse_reset_params(root, files)
        _reset_params_recent[str(root)] = (time.monotonic(), _reset_params_cache[key])
        return _reset_params_cache[key]


def recent_reset_params(
    source_dir: str | os.PathLike[str],
) -> tuple[ResetParams | None] | None:
    """`read_reset_params`'s answer for `source_dir` (in a 1-tuple) while it is
    recent enough to give without looking at the files, else None: an answer an
    event loop can take without a thread."""
    with _reset_params_lock:
        recent = _reset_params_recent.get(str(Path(source_dir)))
    if recent and time.monotonic() - recent[0] < RESET_PARAMS_RECHECK_S:
        return (recent[1],)
    return None


RESET_PARAMS_RECHECK_S = 5.0
"""How long `read_reset_params` trusts its last look at a folder's files."""
_reset_params_lock = threading.Lock()
_reset_params_cache: dict[tuple[str, tuple[Any, ...]], ResetParams | None] = {}
_reset_params_recent: dict[str, tuple[float, ResetParams | None]] = {}
_RESET_PARAMS_CACHE_SIZE = 64


def _file_stamp(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), stat.st_size, stat.st_mtime_ns)


def _parse_reset_params(root: Path, files: list[Path]) -> ResetParams | None:
    # class name -> (base names, its reset / reset_async arguments, file)
    classes: dict[str, tuple[list[str], list[tuple[str, ast.arguments]], str]] = {}
    for path in files:
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                methods = [
                    (item.name, item.args)
                    for item in node.body
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                    and item.name in ("reset", "reset_async")
                ]
                bases = [_base_name(b) for b in node.bases]
                rel = str(path.relative_to(root))
                classes.setdefault(node.name, (bases, methods, rel))

    def is_env(name: str, seen: frozenset[str]) -> bool:
        return any(
            base in _ENV_BASES or (base not in seen and is_env(base, seen | {base}))
            for base in (classes[name][0] if name in classes else ())
        )

    names: set[str] = set()
    any_keyword, where = False, []
    for cls, (_, methods, rel) in classes.items():
        if not methods or not is_env(cls, frozenset({cls})):
            continue
        for method, args in methods:
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs][1:]  # no self
            names.update(p.arg for p in params)
            any_keyword = any_keyword or args.kwarg is not None
            where.append(f"{cls}.{method} in {rel}")
    if not where:
        return None
    return ResetParams(frozenset(names), any_keyword, ", ".join(sorted(where)))


def python_files(root: Path) -> list[Path]:
    """The project's Python files (no hidden, vendored or cache folders), at most
    `_MAX_SOURCE_FILES`."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in _SKIP_DIRS and not d.startswith(".")
        )
        found += [Path(dirpath, f) for f in sorted(filenames) if f.endswith(".py")]
        if len(found) >= _MAX_SOURCE_FILES:
            break
    return found[:_MAX_SOURCE_FILES]


def _base_name(node: ast.expr) -> str:
    """`Environment` for `Environment`, `interfaces.Environment`, `Environment[A, O]`."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def env_source_dir(target: EnvTarget) -> str | None:
    """The local source of the env's server, when this episode launches it with UV
    from a local `project_path` (`manifest.local_project_dir`)."""
    if target.connects or target.launcher != "uv":
        return None
    return local_project_dir(target.provider_kwargs)
