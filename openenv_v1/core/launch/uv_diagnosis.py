"""What a UV-launched env server's output says when it exits before it is ready:
a port taken first (`ADDRESS_IN_USE`), the stand-in `gradio` refused
(`GRADIO_REFUSED`), an app candidate that cannot be imported (`app_import_failure`),
else the usual cause in words the user can act on (`crash_hint`, `no_app_message`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from openenv_v1.core.launch.env_project import AppChoice
from openenv_v1.core.setting_names import setting

GRADIO_NEEDED = (
    "the env imports gradio without declaring it in its pyproject.toml dependencies "
    "(openenv-v1 hides gradio from such envs to halve their start), so it was "
    f"relaunched with gradio; turn on {setting('server_web_ui')} to skip the "
    "first try"
)
GRADIO_REFUSED = "gradio is hidden from this env server"
"""What the stand-in `gradio` package (no_gradio/) says when it is imported."""
ADDRESS_IN_USE = re.compile(r"address already in use", re.IGNORECASE)
_PYTHON_PINNED = re.compile(
    r"requested interpreter resolved to Python (\S+), which is incompatible with "
    r"the project's Python requirement: `([^`]+)`"
)
_PYTHON_UNAVAILABLE = re.compile(
    r"No interpreter found for Python|python-build-standalone|"
    r"No download found for request|Python downloads are (?:disabled|not allowed)"
)


def app_import_failure(choice: AppChoice, tail: str) -> str | None:
    """The line of `tail` saying `choice` itself (not a dependency) cannot be
    imported; None when the server failed for another reason."""
    module, _, attribute = choice.app.partition(":")
    prefixes = {module.rsplit(".", n)[0] for n in range(module.count(".") + 1)}
    for line in reversed(tail.splitlines()):
        line = line.strip()
        if f'Could not import module "{module}"' in line:
            return f"ModuleNotFoundError: No module named {module!r}"
        if f'Attribute "{attribute}" not found in module "{module}"' in line:
            return line
        if "attempted relative import" in line:
            return line
        missing = re.search(r"No module named '([^']+)'", line)
        if missing and missing[1] in prefixes:
            return line
    return None


def crash_hint(
    tail: str,
    *,
    port: int | None,
    port_picked: bool,
    python_requirement: str | None,
) -> str:
    """The usual cause of a crashed start, as a parenthesis to append ("" when
    unknown): its `port` in use, a Python uv could not provide, or one it was told
    to use that the env does not support."""
    if ADDRESS_IN_USE.search(tail) and port is not None:
        if not port_picked:
            return (
                f" (port {port} is in use by another process: give another "
                "port, or none and the launcher picks a free one)"
            )
        return (
            f" (the free ports picked for it, the last {port}, were taken by "
            "other processes before it bound them)"
        )
    if pinned := _PYTHON_PINNED.search(tail):
        found, needed = pinned.groups()
        return (
            f" (the env needs Python {needed}, and uv was told to use Python "
            f"{found}: UV_PYTHON in the eval's environment, which env servers "
            "inherit, or a .python-version file in the env's folder; unset it, or "
            "point it at an installed Python the env supports)"
        )
    if _PYTHON_UNAVAILABLE.search(tail):
        version = re.search(r"\d+\.\d+", python_requirement or "")
        version = version[0] if version else "<version>"
        return (
            f" (the env needs Python {python_requirement or 'that uv cannot find'}, "
            "and uv found no such interpreter and could not download one: install "
            f"one with `uv python install {version}` where there is network, or "
            f"point UV_PYTHON at an installed one, e.g. "
            f"UV_PYTHON=/usr/bin/python{version})"
        )
    return ""


def no_app_message(
    user_app: str | None, failed_apps: Sequence[tuple[AppChoice, str]], tail: str
) -> str:
    """The failure once no app could be imported: `user_app`'s, or each candidate's."""
    if user_app:
        return (
            f"env server `uv run ... uvicorn {user_app}` cannot import its "
            f"app: {failed_apps[-1][1]}; check {setting('provider_kwargs.app')} "
            f"(`module:attribute` importable from the env project); its output "
            f"ends with:\n{tail}"
        )
    tried = "; ".join(
        f"{choice.app} ({choice.source}): {why}" for choice, why in failed_apps
    )
    return (
        f"none of the env's app candidates could be imported: {tried}; set "
        f"{setting('provider_kwargs.app')} to the module that calls `create_app`"
    )
