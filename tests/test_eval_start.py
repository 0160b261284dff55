"""What building a verifiers 0.2 eval's taskset starts before any rollout, so that it
comes up while verifiers is still starting: the simulator fork server and the shared
pool's first env server, both in the background. `close()` stops both with no
rollout run, and a build that fails stops what it had started."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
from openenv_v1.core.launch.pool import ServerPool
from tests.servers import WORDLE_APP, WORDLE_PROJECT, wait_until, wordle_uv_servers


def descendants() -> set[int]:
    """Live (not zombie) processes under this one, at any depth."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if fields[0] != "Z":
                    parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found |= frontier
    return found


def wordle_config(**settings: object) -> OpenEnvConfig:
    kwargs = {"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP}
    user = {"provider_kwargs": kwargs, **settings.pop("user", {})}  # type: ignore[dict-item]
    return OpenEnvConfig(
        env="local/wordle",
        resets=[{"seed": 1}, {"seed": 2}],
        task={"user": user},
        **settings,
    )


def test_building_the_taskset_starts_the_fork_server_and_one_env_server_and_close_stops_both():
    before = descendants()
    taskset = OpenEnvTaskset(wordle_config())
    try:
        forks, pool = taskset.forks, taskset.pool
        assert forks is not None and isinstance(pool, ServerPool)
        assert forks._proc is not None and forks._proc.poll() is None
        assert pool.launched() == 1
        # No rollout has asked for either: the fork server binds its socket and
        # the env server comes up on their own.
        assert wait_until(lambda: os.path.exists(forks.socket_path), 60)
        assert wait_until(lambda: pool.servers() != [], 120)
        assert pool.launched() == 1
        assert wordle_uv_servers() != []
        assert forks._proc.pid in descendants() - before
    finally:
        taskset.close()
    assert wait_until(lambda: descendants() <= before, 15), descendants() - before
    assert wordle_uv_servers() == []
    assert not Path(forks.socket_path).parent.exists()


def test_a_taskset_that_fails_to_build_leaves_no_process(monkeypatch):
    """The fork server is launched before the settings are checked against the env
    folder; a check that fails stops it."""
    monkeypatch.delenv("OPENENV_V1_MISSING_TOKEN", raising=False)
    before = descendants()
    config = wordle_config(user={"forward_env": ["OPENENV_V1_MISSING_TOKEN"]})
    assert config.fork_simulators
    with pytest.raises(ValueError, match="OPENENV_V1_MISSING_TOKEN, not set"):
        OpenEnvTaskset(config)
    assert wait_until(lambda: descendants() <= before, 15), descendants() - before
