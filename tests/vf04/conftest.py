"""The verifiers 0.4 binding's tests: real `vf-eval` runs against real servers on
127.0.0.1. Collected only where verifiers 0.4 is installed:

    uv sync --locked --extra vf04 --no-group vf02 && uv run pytest tests/vf04
"""

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_v1 import verifiers_line
from tests.servers import (
    WORDLE_APP,
    WORDLE_PROJECT,
    serve_on_free_port,
    stop,
    without_gradio,
)

if verifiers_line() != "vf04":
    collect_ignore_glob = ["test_*.py"]


@contextlib.contextmanager
def wordle_project_server(venv: Path) -> Iterator[str]:
    """The local Wordle env served from an environment of its own project at `venv`
    (its server needs openenv 0.10, which verifiers 0.4's environment cannot hold),
    with `python -m uvicorn`, so it is not counted as a UV-launched server."""
    sync_wordle_project(venv)
    with wordle_project_app(venv) as url:
        yield url


def sync_wordle_project(venv: Path) -> None:
    """The local Wordle project's own environment, at `venv`."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    sync = ["uv", "sync", "--project", str(WORDLE_PROJECT), "--locked", "--quiet"]
    subprocess.run(sync, env=env, check=True, timeout=300)


@contextlib.contextmanager
def wordle_project_app(
    venv: Path, app: str = WORDLE_APP, app_dir: Path | None = None
) -> Iterator[str]:
    """`app` (from `app_dir`, if given) served from the Wordle project's environment
    at `venv` (`sync_wordle_project`); yields its base URL."""
    extra = ["--app-dir", str(app_dir)] if app_dir is not None else []
    proc, port = serve_on_free_port(
        lambda port: (
            [str(venv / "bin" / "python"), "-m", "uvicorn", app, *extra]
            + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
        ),
        "/health",
        without_gradio(os.environ),
        cwd=WORDLE_PROJECT,
        timeout=120,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def wordle_url(tmp_path_factory) -> Iterator[str]:
    """The local Wordle env, served directly (base_url mode)."""
    with wordle_project_server(tmp_path_factory.mktemp("wordle-venv")) as url:
        yield url
