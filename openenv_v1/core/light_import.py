"""Import OpenEnv's client side without gradio.

`import openenv` imports gradio for its web UI: seconds and ~100 MB a client never
uses, paid by every rollout process. OpenEnv treats gradio as optional (it catches the
`ModuleNotFoundError`), so hiding gradio during the first import gives the same
client, minus the UI.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any


@contextlib.contextmanager
def without_gradio() -> Iterator[None]:
    """Make `import gradio` fail inside the block, unless gradio is already loaded;
    undone on exit, so later code that wants gradio can still import it."""
    hidden = "gradio" not in sys.modules
    if hidden:
        sys.modules["gradio"] = None  # type: ignore[assignment]  # -> ModuleNotFoundError
    try:
        yield
    finally:
        if hidden and sys.modules.get("gradio", ...) is None:
            del sys.modules["gradio"]


def generic_client_class() -> type:
    """OpenEnv's `GenericEnvClient` (`openenv_lines`'), imported without gradio."""
    from openenv_v1.core.openenv_lines import GenericEnvClient

    return GenericEnvClient


def lazy_exports(module: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `module` that imports each public name from its
    home module (`homes`: name -> module path) on first use and keeps it in the
    module's globals, so importing the package imports none of them."""

    def attribute(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)
        return value

    return attribute
