"""What to try when `openenv-v1 check` fails: a hint from the error text or stage.

The errors come from the rollout code and name rollout settings
(`task.user.provider_kwargs.app`); the hints name the `check` flags instead.
"""

from __future__ import annotations

import re

_HINTS: list[tuple[str, str]] = [
    (
        r"ModuleNotFoundError: No module named '[^']+': the `app` module|"
        r"Could not import module",
        "--app must name the ASGI app as `package.module:attribute`, importable from "
        "the env project (--project-path); look for the module that calls "
        "`create_app` (e.g. `<pkg>.server.app:app`)",
    ),
    (
        r"ModuleNotFoundError|No module named",
        "a module the server imports is missing: add it to the env project's "
        "pyproject.toml dependencies",
    ),
    (
        r"ECONNREFUSED|Connection refused",
        "nothing is listening there: start the server, or fix the host/port of "
        "--base-url",
    ),
    (
        r"EAI_|Name or service not known|nodename nor servname",
        "the host name does not resolve: check --base-url",
    ),
    (
        r"is not a directory",
        "--project-path must be the env's source checkout (the directory with its "
        "pyproject.toml)",
    ),
    (
        r"could not fetch the environment source",
        "without git and network access, use --project-path with a local checkout, "
        "or --base-url with a running server",
    ),
    (
        r"was not ready within",
        "raise --launch-timeout if the server is only slow to start; otherwise read "
        "its output above",
    ),
    (
        r"CAPACITY_REACHED|at capacity",
        "the server's sessions are all in use: wait for other clients to finish, or "
        "raise the server's max_concurrent_envs",
    ),
    (r"[Dd]ocker", "use_docker needs a running Docker daemon that can pull the image"),
]
_STAGE_HINTS = {
    "schema": "is this an OpenEnv server? GET /schema must return the action schema",
    "reset": "check --reset: its keys must be parameters of the env's reset()",
    "step": "check --action against the action schema above",
    "health": "the server answers but is not healthy; read its logs",
}


def hint_for(stage: str, error: str) -> str | None:
    """A suggested fix for a failure, from the error text, else from the stage."""
    for pattern, hint in _HINTS:
        if re.search(pattern, error):
            return hint
    return _STAGE_HINTS.get(stage)
