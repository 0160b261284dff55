"""The starts of one UV launch: which app, on which port, with gradio or not, and what
follows a server that exited before it was ready (`UVStarts.next_start`): the same
app on a fresh port when the picked one was taken first (`PORT_MOVES` at most); with
gradio when hiding it killed the server (`GRADIO_REFUSED`); the next app candidate
when its app cannot be imported; else an `EnvFailure` with the exit code, the cause
where known (`uv_diagnosis.crash_hint`) and the output's tail.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.env_project import AppChoice, EnvProject
from openenv_v1.core.launch.uv_diagnosis import (
    ADDRESS_IN_USE,
    GRADIO_NEEDED,
    GRADIO_REFUSED,
    app_import_failure,
    crash_hint,
    no_app_message,
)
from openenv_v1.core.launch.uv_server import ServerSpec
from openenv_v1.core.openenv_lines import find_free_port
from openenv_v1.core.setting_names import setting

__all__ = ["PORT_MOVES", "UVStarts", "hides_gradio"]

logger = logging.getLogger(__name__)

PORT_MOVES = 5
"""Relaunches on another port when the picked one was taken first."""
# Projects (their folders) found to import gradio in this process: launched with it.
_IMPORTS_GRADIO: set[str] = set()


def hides_gradio(project: EnvProject, web_ui: bool, env: Mapping[str, str]) -> bool:
    """Whether `project`'s server starts with gradio hidden: unless asked (`web_ui`,
    `ENABLE_WEB_INTERFACE`), declared, or needed by one of its servers before."""
    return not (
        web_ui
        or project.declares_gradio
        or str(project.path) in _IMPORTS_GRADIO
        or _truthy(env.get("ENABLE_WEB_INTERFACE"))
    )


def app_candidates(project: EnvProject, user_app: str | None) -> list[AppChoice]:
    """The apps to try in turn: the `app` setting, else what the project names."""
    if user_app:
        return [AppChoice(user_app, f"set in {setting('provider_kwargs.app')}")]
    candidates = project.app_candidates()
    if not candidates:
        raise EnvFailure(
            f"no ASGI app found in {project.path}: no [project.scripts] server "
            "entry, no `app` in openenv.yaml, no server/app.py; set "
            f"{setting('provider_kwargs.app')} to the module that calls "
            "`create_app`, e.g. `<pkg>.server.app:app`"
        )
    return candidates


class UVStarts:
    """The starts of one launch of `project` (the module docstring), from the first
    app candidate on `spec`'s port; `port_picked`: the launcher chose the port."""

    def __init__(
        self,
        project: EnvProject,
        user_app: str | None,
        spec: ServerSpec,
        *,
        port_picked: bool,
    ) -> None:
        self.project = project
        self.candidates = app_candidates(project, user_app)
        self.choice = self.candidates[0]
        """The app the next (or current) start serves, and why."""
        self.spec = replace(spec, app=self.choice.app)
        """What the next (or current) start runs."""
        self.user_app = user_app
        self.port_picked = port_picked
        self.port_moves = 0
        self.failed_apps: list[tuple[AppChoice, str]] = []
        """Candidates that could not be imported, with the line that said so."""
        self.notes: list[str] = []
        """What the user should know about this launch (e.g. gradio was needed)."""

    def next_start(self, code: int, tail: str) -> None:
        """After the server exited with `code` before it was ready (output ending in
        `tail`): move `spec` and `choice` on, or raise `EnvFailure` naming why."""
        if self._move_port(tail) or self._allow_gradio(tail):
            return
        choice = self.choice
        failure = app_import_failure(choice, tail)
        if failure is None:
            raise EnvFailure(
                f"env server `uv run ... uvicorn {choice.app}` exited with code {code} "
                f"before it was ready{self.diagnose(tail)}; its output ends with:\n"
                f"{tail}"
            )
        self.failed_apps.append((choice, failure))
        left = self.candidates[len(self.failed_apps) :]
        if not left:
            raise EnvFailure(no_app_message(self.user_app, self.failed_apps, tail))
        logger.info(
            "app %s (%s) cannot be imported: %s; trying %s",
            choice.app,
            choice.source,
            failure,
            left[0].app,
        )
        self.choice, self.spec = left[0], replace(self.spec, app=left[0].app)

    def _move_port(self, tail: str) -> bool:
        """Whether another process took the picked port: the next start moves."""
        if not (
            self.port_picked
            and self.port_moves < PORT_MOVES
            and ADDRESS_IN_USE.search(tail)
        ):
            return False
        self.port_moves += 1
        taken, self.spec = self.spec.port, replace(self.spec, port=find_free_port())
        logger.info(
            "%s: port %d was taken before the server bound it; relaunching on %d",
            self.project.name,
            taken,
            self.spec.port,
        )
        return True

    def _allow_gradio(self, tail: str) -> bool:
        """Whether the server died importing the hidden gradio: then this project's
        servers start with it, and a note says so."""
        if not (self.spec.hide_gradio and GRADIO_REFUSED in tail):
            return False
        self.spec = replace(self.spec, hide_gradio=False)
        _IMPORTS_GRADIO.add(str(self.project.path))
        self.notes.append(GRADIO_NEEDED)
        logger.warning("%s: %s", self.project.name, GRADIO_NEEDED)
        return True

    def diagnose(self, tail: str) -> str:
        """Name the usual cause of a crashed start in words the user can act on."""
        return crash_hint(
            tail,
            port=self.spec.port,
            port_picked=self.port_picked,
            python_requirement=self.project.python_requirement,
        )


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}
