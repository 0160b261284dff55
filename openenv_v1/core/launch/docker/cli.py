"""The `docker` client (`$OPENENV_V1_DOCKER`, else `docker` on PATH) and the one
place it is run: `call_docker`, and `run_docker` (a timeout as exit code 124, a
client that cannot run as an `EnvFailure` naming the fix) for callers without a
failure of their own. `docker_port` reads a published port. `LastSaid` is a
`docker` answer refreshed in the background, so a reader under a lock never waits.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from openenv_v1.core.errors import EnvFailure

_T = TypeVar("_T")

DOCKER_VAR = "OPENENV_V1_DOCKER"


def docker_cli() -> str:
    """The `docker` client to run: `$OPENENV_V1_DOCKER`, else `docker` on PATH."""
    return os.environ.get(DOCKER_VAR) or "docker"


def call_docker(
    *args: str, timeout: float = 30.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`docker <args>`, its output captured, `env` added to this process's;
    `subprocess.TimeoutExpired` or `OSError` raised."""
    return subprocess.run(
        [docker_cli(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **env} if env else None,
    )


def run_docker(
    *args: str, timeout: float = 30.0, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`call_docker`, with a timeout as exit code 124 (with the reason as stderr)
    and a client that cannot run as an `EnvFailure` naming it."""
    try:
        return call_docker(*args, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            args, 124, "", f"timed out after {timeout:.0f}s"
        )
    except OSError as e:
        raise EnvFailure(
            f"cannot run the Docker client {docker_cli()!r}: {e} (install Docker, "
            "or point OPENENV_V1_DOCKER at its `docker`)"
        ) from e


def docker_port(
    container: str, port: int
) -> tuple[str | None, subprocess.CompletedProcess[str]]:
    """The `address:port` `container` first publishes its `port`/tcp on, or None;
    and Docker's answer, for a failure to quote."""
    result = run_docker("port", container, f"{port}/tcp")
    for line in result.stdout.splitlines():
        address, _, number = line.strip().rpartition(":")
        if number.isdigit():
            return f"{address}:{number}", result
    return None, result


class LastSaid(Generic[_T]):
    """What `ask()` (a `docker` query) last answered, starting from `first`."""

    def __init__(self, ask: Callable[[], _T], first: _T, *, thread: str) -> None:
        self._ask, self._value, self._thread = ask, first, thread
        self._at = 0.0
        self._asking = False
        self._lock = threading.Lock()

    def get(self, max_age: float) -> _T:
        """The answer; when older than `max_age` seconds, asked again in the
        background (the last answer returned), or now for `max_age` 0."""
        with self._lock:
            if time.monotonic() - self._at < max_age:
                return self._value
            if max_age > 0:
                if not self._asking:
                    self._asking = True
                    threading.Thread(
                        target=self._refresh, name=self._thread, daemon=True
                    ).start()
                return self._value
        self._refresh()
        with self._lock:
            return self._value

    def set(self, value: _T) -> None:
        """Take `value` as the answer Docker gave now (one seen another way)."""
        with self._lock:
            self._value, self._at = value, time.monotonic()

    def _refresh(self) -> None:
        try:
            value = self._ask()
            with self._lock:
                self._value = value
        finally:
            with self._lock:
                self._at = time.monotonic()
                self._asking = False
