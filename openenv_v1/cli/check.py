"""`openenv-v1 check`: meet an env the way a rollout does, and say what it found.

The check plays the rollout's own episode (`open_episode` launches or connects and
reads the action contract, `EnvEpisode` resets and steps by its own rules), so a
check that passes means a rollout gets as far, and a failure carries the cause a
rollout's trace would (for a UV launch, the server's own output), plus a hint for
the fix. What it adds is its own: the reads of what the server serves (`SERVED`,
from within the launch), the findings about the env folder, the fresh sessions (the
seed check, the session probe) and the report; an env that cannot play (a reset or
step the episode refuses) is never OK. docs/check.md says what each stage reports.

The stages are data: `STAGES` names each, its function and the report field its
typed summary fills, and one loop runs them; the first failure ends the check.
Nothing here imports verifiers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from openenv_v1.cli.check_report import CheckOptions, CheckReport
from openenv_v1.cli.check_sessions import check_seeds, probe
from openenv_v1.cli.check_stages import (
    CheckRun,
    StageFailed,
    explainer,
    play_reset,
    play_step,
    read_health,
    read_metadata,
    read_schema,
    read_tasks,
    steps,
)
from openenv_v1.core.episode.env_episode import open_episode
from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.launch.plan import launcher_label
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.manifest import Manifest, ManifestError, read_manifest

__all__ = ["CheckOptions", "CheckReport", "run_check"]


async def run_check(
    options: CheckOptions,
    report: CheckReport,
    progress: Callable[[str], None] = lambda _: None,
) -> None:
    """Fill `report`. Whatever was launched is stopped before this returns, also when
    it is cancelled."""
    started = time.monotonic()
    try:
        async with contextlib.AsyncExitStack() as stack:
            try:
                await _check(CheckRun(options, report, stack, progress))
            except (StageFailed, EnvFailure) as e:
                # Read before the stack stops the server and removes its log.
                raise StageFailed(_with_server_output(str(e), report)) from e
    except (StageFailed, EnvFailure) as e:
        report.fail(str(e), reset_keys=bool(options.reset))
    except Exception as e:
        report.fail(describe(e), reset_keys=bool(options.reset))
    finally:
        report.elapsed_s = round(time.monotonic() - started, 2)


# Server error codes whose message hides the env's own exception, which the server
# logs: FACTORY_ERROR says only that building the env failed.
_LOGGED_CAUSES = (
    "(FACTORY_ERROR)",
    "(EXECUTION_ERROR)",
    "HTTPStatusError: Server error",
)
_SERVER_OUTPUT_CHARS = 1500


def _with_server_output(error: str, report: CheckReport) -> str:
    """`error`, plus the end of the launched server's output when the error is one
    whose cause only that output shows."""
    provider = report.launched
    if provider is None or not any(cause in error for cause in _LOGGED_CAUSES):
        return error
    tail = provider.log_tail(_SERVER_OUTPUT_CHARS)
    return f"{error}\nthe env server's output ends with:\n{tail}" if tail else error


async def _read_manifest(run: CheckRun) -> Manifest | None:
    try:
        return read_manifest(run.options.target.provider_kwargs.get("project_path"))
    except ManifestError as e:
        raise StageFailed(str(e)) from e


async def _open(run: CheckRun) -> str:
    """The rollout's episode, launched or connected by `open_episode`; the server's
    URL. Once its session is open, and before the episode reads the contract, the
    `SERVED` stages read what the server serves."""
    options = run.options
    run.progress(_launch_line(options.target))
    started = time.monotonic()

    async def served(url: str) -> None:
        run.report.launch_s = round(time.monotonic() - started, 2)
        run.report.server_url = run.url = url
        run.http = await run.stack.enter_async_context(
            httpx.AsyncClient(timeout=run.timeout_s, trust_env=False)
        )
        await _run(run, SERVED)
        run.report.stage = "schema"  # the contract read that follows

    episode = options.episode
    run.episode = await open_episode(
        options.target,
        dataclasses.replace(episode.limits(), resume=False),  # a check resumes nothing
        run.stack,
        observation_format=episode.observation_format,
        observation_images=episode.observation_images,
        max_observation_chars=episode.max_observation_chars,
        on_launch=run.report.record_launch,
        on_connect=served,
    )
    run.episode.explain = explainer(options)
    return run.url


def _connects(run: CheckRun) -> bool:
    return bool(run.options.target.base_url)


def _launches(run: CheckRun) -> bool:
    return not run.options.target.base_url


@dataclass(frozen=True)
class Stage:
    """One stage: its `name` (what a failure there is reported at), its function,
    and the `CheckReport` field its typed summary fills; it runs only `when` true."""

    name: str
    run: Callable[[CheckRun], Awaitable[Any]]
    summary: str
    when: Callable[[CheckRun], bool] = lambda _: True


SERVED: tuple[Stage, ...] = (
    Stage("health", read_health, "health"),
    Stage("metadata", read_metadata, "metadata"),
    Stage("tasks", read_tasks, "tasks"),
)
"""What the server serves, read from within the launch stage (`_open`)."""
STAGES: tuple[Stage, ...] = (
    Stage("manifest", _read_manifest, "manifest", when=_launches),
    Stage("connect", _open, "server_url", when=_connects),
    Stage("launch", _open, "server_url", when=_launches),
    Stage("schema", read_schema, "action"),
    Stage("reset", play_reset, "reset"),
    Stage("step", play_step, "step", when=steps),
    Stage("seed check", check_seeds, "seed_check"),
    Stage("sessions", probe, "sessions"),
)
_FIELDS = {f.name for f in dataclasses.fields(CheckReport)}
assert {s.summary for s in STAGES + SERVED} <= _FIELDS, "each stage fills a field"


async def _run(run: CheckRun, stages: tuple[Stage, ...]) -> None:
    for stage in stages:
        if stage.when(run):
            run.report.stage = stage.name
            setattr(run.report, stage.summary, await stage.run(run))


async def _check(run: CheckRun) -> None:
    await _run(run, STAGES)
    run.report.stage = "cleanup"


def _launch_line(target: EnvTarget) -> str:
    if target.base_url:
        return f"connecting to {target.base_url} ..."
    how = launcher_label(target.launcher)
    if target.launcher == "uv":
        where = (
            target.provider_kwargs.get("project_path") or "its Space repo (git clone)"
        )
        how = f"UV from {where}"
    return (
        f"launching {target.env} with {how} (up to {target.launch_timeout_s:.0f}s) ..."
    )
