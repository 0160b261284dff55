"""Start the user simulator without the parts of verifiers it never runs.

`import verifiers.v1` imports all of verifiers: 6-10 s of CPU on a small machine,
most of it anthropic and sympy (through math_verify), which a simulator never calls;
at 64 rollouts in flight on 2 cores, 64 such starts never all reported their port
within verifiers' 180 s. `hide_unused_modules()`, called before verifiers is first
imported (in the simulator, and in the native tool server), gives those packages as
placeholders: importing them and naming what they define works (verifiers' modules
do both while they load), but calling anything in them, or reading an attribute off
it, raises `UnusedModuleError` naming the package and the way back. Only the
packages in `UNUSED` are affected, and only in the process that calls it.

    hide_unused_modules()            # first thing in the simulator process
    import verifiers.v1 as vf        # now ~3x cheaper

`OPENENV_V1_FULL_IMPORT=1` in the eval's environment turns it off.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence
from typing import Any, NoReturn

UNUSED: tuple[str, ...] = ("anthropic", "math_verify", "fastmcp")
"""Packages the simulator never calls, and what they cost it when imported:
anthropic (~45% of `import verifiers.v1`) is verifiers' Anthropic client and message
types; math_verify brings sympy, latex2sympy2 and mpmath (~35%), for verifiers' math
scorers; fastmcp (with py-key-value and beartype) comes with OpenEnv's client, for
its MCP env *server* side. All are imported at module level, so they must exist;
none is called by the simulator (its own MCP server is `mcp`'s FastMCP, a different
package). Add a package here only if nothing the simulator runs calls into it; the
end-to-end tests (text, native tools, images, `eval --server`) all run through the
simulator, and `tests/test_light_verifiers.py` checks the cut itself."""

FULL_IMPORT_VAR = "OPENENV_V1_FULL_IMPORT"
"""Set to 1 to import everything in the simulator (the path before this module)."""


class UnusedModuleError(BaseException):
    """Something in a package hidden from the user simulator was actually used.

    A `BaseException`, like `SystemExit`: code that falls back on any `Exception`
    (verifiers' math scorer returns 0.0 on one) must not turn this into a quiet
    wrong answer."""


def _refuse(what: str) -> NoReturn:
    package = what.split(".")[0]
    raise UnusedModuleError(
        f"{what} was used in openenv-v1's user simulator, which loads {package} only as "
        f"a placeholder (see openenv_v1.vf02.simulator.light_verifiers: the simulator never needs "
        f"it). Set {FULL_IMPORT_VAR}=1 to load it for real, and report this as a bug."
    )


class _PlaceholderType(type):
    """The metaclass of a placeholder: naming it works (annotations, `X | Y`,
    `isinstance`, `except`), using it does not."""

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        _refuse(f"{cls.__module__}.{cls.__qualname__}")

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            # Dunder probes (pydantic's `__get_pydantic_core_schema__`, `__wrapped__`,
            # ...) must see a plain absence.
            raise AttributeError(name)
        raise AttributeError(
            f"{cls.__module__}.{cls.__qualname__}.{name}: "
            f"{cls.__module__.split('.')[0]} is a placeholder in openenv-v1's user "
            f"simulator; set {FULL_IMPORT_VAR}=1 to load it"
        )

    def __getitem__(cls, item: Any) -> NoReturn:
        _refuse(f"{cls.__module__}.{cls.__qualname__}[...]")

    def __repr__(cls) -> str:
        return f"<placeholder {cls.__module__}.{cls.__qualname__}>"


class _Placeholder(Exception, metaclass=_PlaceholderType):
    """Base of every placeholder. An `Exception` so that `except placeholder:` is
    legal (it never matches: nothing can create one)."""


class _PlaceholderModule(types.ModuleType):
    """A hidden package or submodule: any public name it is asked for is a
    placeholder class of that name, made once."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = _PlaceholderType(
            name, (_Placeholder,), {"__module__": self.__name__, "__qualname__": name}
        )
        setattr(self, name, value)
        return value


class _PlaceholderLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _PlaceholderModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # a package, so `import hidden.sub` also resolves here


class _PlaceholderFinder(importlib.abc.MetaPathFinder):
    def __init__(self, packages: Sequence[str]) -> None:
        self.packages = tuple(packages)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] in self.packages:
            return importlib.machinery.ModuleSpec(
                fullname, _PlaceholderLoader(), is_package=True
            )
        return None


def is_placeholder(module_or_value: object) -> bool:
    """Whether a module, or a name taken from one, is a placeholder."""
    return isinstance(module_or_value, _PlaceholderModule | _PlaceholderType)


def hide_unused_modules(packages: Sequence[str] = UNUSED) -> list[str]:
    """Make the not-yet-imported `packages` placeholders in this process; returns the
    ones hidden (none when `OPENENV_V1_FULL_IMPORT=1`). Call it before verifiers is
    first imported, and only in a simulator or native tool server process (neither
    calls them): it cannot be undone."""
    if os.environ.get(FULL_IMPORT_VAR, "").strip() not in ("", "0"):
        return []
    if any(isinstance(f, _PlaceholderFinder) for f in sys.meta_path):
        return []
    hidden = [name for name in packages if name not in sys.modules]
    if hidden:
        sys.meta_path.insert(0, _PlaceholderFinder(hidden))
    return hidden
