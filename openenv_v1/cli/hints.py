"""What to try when `openenv-v1 check` fails: a hint from the error text or stage.

A hint adds what the error does not say; an error that says its own fix gets none
(its pattern still stops the search, so a later pattern's hint does not mislead).
"""

from __future__ import annotations

import re
from typing import Literal

_Applies = Literal["any", "base_url", "launch"]

# (pattern, hint or None, when it applies: a launch, a --base-url, any); first wins.
_HINTS: dict[str, tuple[str | None, _Applies]] = {
    r"forward .* by name with `--forward-env`": (None, "any"),
    r"ended the episode at its reset|the env's (reset|step) failed": (
        "the env refused to play: its own code says why (a reset reply's `metadata`, "
        "which openenv-core 0.3.0 servers strip; the server's log); a credential it "
        "reads goes in with --forward-env, a reset kwarg it needs with --reset",
        "any",
    ),
    r"the env needs Python": (
        "install the Python the env asks for (`uv python install <version>` where "
        "there is network) or point UV_PYTHON at an installed interpreter",
        "launch",
    ),
    r"app candidates could be imported|cannot import its app|Could not import module": (
        "the app is named as `package.module:attribute`, importable from the env "
        "project; look for the module that calls `create_app` (e.g. "
        "`<pkg>.server.app:app`)",
        "launch",
    ),
    r"ModuleNotFoundError|No module named": (
        "a module the server imports is missing: add it to the env project's "
        "pyproject.toml dependencies",
        "any",
    ),
    r"list_tools step (did not answer|got no answer)": (
        "if the env runs openenv-core 0.2.2: `uv lock --upgrade-package "
        "openenv-core` in its project, or launch it from its folder (--project-path) "
        "with its own uv.lock, and its tools are called through the session's "
        "JSON-RPC",
        "any",
    ),
    r"\(FACTORY_ERROR\)": (
        "the server could not build the env for a new session: its output (above, "
        "for a launch) names why, often a download, service or binary the env needs",
        "any",
    ),
    r"\(EXECUTION_ERROR\)": (
        "the env raised an exception of its own: its output (above, for a launch) "
        "has the traceback",
        "any",
    ),
    r"ECONNREFUSED|Connection refused": (
        "nothing is listening there: start the server, or fix the host/port of "
        "--base-url",
        "base_url",
    ),
    r"EAI_|Name or service not known|nodename nor servname": (
        "the host name does not resolve: check --base-url",
        "base_url",
    ),
    r"is not a directory": (
        "the env's source checkout is the directory with its pyproject.toml",
        "launch",
    ),
    r"could not fetch the environment source": (None, "launch"),
    r"was not ready within": (None, "launch"),
    r"CAPACITY_REACHED|at capacity": (
        "the server's sessions are all in use: wait for other clients to finish, or "
        "raise the server's max_concurrent_envs",
        "any",
    ),
    r"[Dd]ocker": (
        "a Docker launch needs a running Docker daemon that can pull the image",
        "launch",
    ),
}
_STAGE_HINTS = {
    "schema": "is this an OpenEnv server? GET /schema must return the action schema",
    "reset": "check --reset: its keys must be parameters of the env's reset()",
    "step": "check --action against the action schema above",
    "health": "the server answers but is not healthy; read its logs",
}


_NO_KEYS_RESET_HINT = (
    "the env's reset() failed with no kwargs: its output (above, for a launch) "
    "names why; --reset passes the kwargs its reset() may need"
)


def hint_for(
    stage: str, error: str, *, base_url: bool = False, reset_keys: bool = True
) -> str | None:
    """A suggested fix for a failure, from the error text, else from the stage.
    `base_url`: the check connected to a running server; `reset_keys`: the reset
    had kwargs."""
    for pattern, (hint, applies) in _HINTS.items():
        if applies == ("launch" if base_url else "base_url"):
            continue
        if re.search(pattern, error):
            return hint  # None: the error says its own fix
    if stage == "reset" and not reset_keys:
        return _NO_KEYS_RESET_HINT
    return _STAGE_HINTS.get(stage)
