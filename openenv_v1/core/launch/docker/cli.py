"""The `docker` client every Docker launch runs, and one way to run it.

`docker_cli()` is `$OPENENV_V1_DOCKER` (e.g. `/usr/bin/docker`, a client with BuildKit
built in), else `docker` on PATH; `run_docker(*args)` runs it with its output
captured, a timeout as exit code 124, and a client that cannot run as an
`EnvFailure` naming the fix.

Imports only `openenv_v1.core.errors`: the bottom of `docker/`.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping

from openenv_v1.core.errors import EnvFailure

DOCKER_VAR = "OPENENV_V1_DOCKER"
"""Environment variable naming the `docker` client to run (default: `docker` on PATH)."""


def docker_cli() -> str:
    """The `docker` client to run: `$OPENENV_V1_DOCKER`, else `docker` on PATH."""
    return os.environ.get(DOCKER_VAR) or "docker"


def run_docker(
    *args: str, timeout: float = 30.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`docker <args>` with its output captured; a timeout is exit code 124 (with
    the reason as stderr), a client that cannot run an `EnvFailure` naming it. `env`
    is added to this process's environment (variables passed by name)."""
    try:
        return subprocess.run(
            [docker_cli(), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **env} if env else None,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            args, 124, "", f"timed out after {timeout:.0f}s"
        )
    except OSError as e:
        raise EnvFailure(
            f"cannot run the Docker client {docker_cli()!r}: {e} (install Docker, "
            "or point OPENENV_V1_DOCKER at its `docker`)"
        ) from e
