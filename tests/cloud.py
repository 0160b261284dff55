"""Shared by the cloud provider tests of both lines: the stand-in SDKs of
`tests/standins`, their sandboxes' servers, and a rollout's use of an env.

A pytest plugin (`tests/conftest.py`): the `standins` fixture makes the stand-in
`daytona` SDK importable, fresh for each test."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.servers import processes_matching

if TYPE_CHECKING:  # openenv is imported by the tests that use it, not by the plugin
    from openenv_v1.core import EnvTarget

STANDINS = Path(__file__).parent / "standins"
SECRET_NAME = "OPENENV_V1_TEST_API_KEY"


@pytest.fixture
def standins(monkeypatch):
    """The stand-in SDKs importable, and fresh (their records empty)."""
    monkeypatch.syspath_prepend(str(STANDINS))
    for name in list(sys.modules):
        if name in ("daytona", "local_sandbox") or name.startswith("daytona."):
            monkeypatch.delitem(sys.modules, name)
    import daytona  # the stand-in

    return daytona


SERVER_MARK = "openenv-v1-standin-sandbox"  # local_sandbox.SERVER_MARK


def standin_servers() -> list[tuple[int, str]]:
    """Live servers of stand-in sandboxes (in any process)."""
    return [
        (pid, cmd)
        for pid, cmd in processes_matching("-m uvicorn")
        if SERVER_MARK in _environ(pid)
    ]


def _environ(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    except OSError:
        return ""


async def play_one_step(target: EnvTarget) -> tuple[Any, Any]:
    """A rollout's use of the env: open, reset, one step, close."""
    from openenv_v1.core import open_env

    async with contextlib.AsyncExitStack() as stack:
        client = await open_env(target, stack)
        first = await client.reset()
        stepped = await client.step({"message": "[crane]"})
    return first, stepped


def daytona_target(secret: str, **kwargs: Any) -> EnvTarget:
    """The local Wordle env in a (stand-in) Daytona sandbox, `secret` forwarded."""
    from openenv_v1.core import EnvTarget

    return EnvTarget(
        env="local/wordle",
        provider="daytona",
        provider_kwargs={"image": "ghcr.io/org/wordle:1", "target": "us", **kwargs},
        secret_env={SECRET_NAME: secret},
        launch_timeout_s=60,
    )
