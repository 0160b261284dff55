"""`openenv-v1 check`: meet an env the way a rollout does, and say what it found.

The env is launched or connected with the rollout's own code (`open_env` on an
`AsyncExitStack`, then `fetch_action_spec`), so a check that passes means a rollout gets
as far; a failure carries the same cause a rollout's trace would (for a UV launch, the
server's own output as soon as it dies), plus a hint for the fix.

Stages, in order; the first failure ends the check:

    manifest           the env folder's openenv.yaml, if it has one (what it declares)
    launch | connect   open_env (UV, Docker, or base_url)
    health, metadata   GET /health (must be OK), GET /metadata (optional)
    tasks              OpenEnv's Task API: splits and their counts, and which tasks a
                       taskset without `resets` would run
    schema             the action schema; for an MCP env, its tools (and whether its
                       calls go as steps or, on openenv-core 0.2.2, as JSON-RPC)
    reset              reset(**reset) on the rollout's session: the first observation,
                       and the turn the model gets (text length, images, cuts)
    step               one --action, parsed like a model reply, stepped (and its turn)
    seed check         the same reset (and action) on a fresh session: same results?
                       Without a seed in the reset: does the env honour seeds (seed 1
                       twice, then seed 2)?
    sessions           how many concurrent sessions the server accepts

Session capacity is not published by OpenEnv servers (no endpoint reports
`max_concurrent_envs`), but a refused session's error names it ("N/M sessions
active"). So sessions are opened one by one, up to `probe_sessions`, until one is
refused; a server that accepts all of them has "at least" that many. Each probe
session is reset with the check's reset kwargs, as a rollout's is (an env can take a
second session and fail its reset), and creates an env instance on the server, hence
the small bound.

The task must reach the model: a reset observation that shows nothing (the task was in
`metadata`, which openenv-core 0.2.3 and 0.3.0 servers strip from `/ws` replies) is
shown from the session's state as a rollout does (`EnvEpisode._task_from_state`), with
a warning; with nothing there either, the warning says the task never reaches the
model. An MCP env's tools are listed again after the reset (as a rollout does); none
then is a failure.

The stages live beside this file: `check_report.py` (what was asked and found),
`check_stages.py` (what the server serves), `check_sessions.py` (fresh sessions).

Nothing here imports verifiers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx

from openenv_v1.cli.check_report import CheckOptions, CheckReport
from openenv_v1.cli.check_sessions import probe_sessions, seed_check
from openenv_v1.cli.check_stages import (
    StageFailed,
    action_summary,
    check_reset_keys,
    raw_action_schema,
    read_health,
    read_metadata,
    read_tasks,
    result_summary,
    stage_call,
    tool_summary,
    turn_summary,
    visible_task,
)
from openenv_v1.core.episode.actions import InvalidAction, parse_action
from openenv_v1.core.episode.env_source import env_source_dir
from openenv_v1.core.episode.mcp_route import SessionRpcClient, route_mcp_steps
from openenv_v1.core.episode.schema import fetch_action_spec, relist_tools
from openenv_v1.core.episode.turns import TurnRenderer
from openenv_v1.core.errors import EnvFailure, describe, keep_error_frames
from openenv_v1.core.http_client import http_base
from openenv_v1.core.launch.plan import launcher_label
from openenv_v1.core.launch.target import EnvTarget, open_env
from openenv_v1.core.manifest import ManifestError, read_manifest

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
                await _check(options, report, stack, progress)
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


async def _check(
    options: CheckOptions,
    report: CheckReport,
    stack: contextlib.AsyncExitStack,
    progress: Callable[[str], None],
) -> None:
    target = options.target
    report.stage = "manifest"
    if not target.base_url:
        try:
            manifest = read_manifest(target.provider_kwargs.get("project_path"))
        except ManifestError as e:
            raise StageFailed(str(e)) from e
        report.manifest = manifest.summary() if manifest else None
    report.stage = "connect" if target.base_url else "launch"
    progress(_launch_line(target))
    started = time.monotonic()
    client = await open_env(target, stack, on_launch=report.record_launch)
    report.launch_s = round(time.monotonic() - started, 2)
    client = route_mcp_steps(
        keep_error_frames(client), env_source_dir(target), target.label
    )
    url = http_base(client.base_url or target.label)
    report.server_url = url

    async with httpx.AsyncClient(timeout=options.timeout_s, trust_env=False) as http:
        report.stage = "health"
        report.health = await read_health(http, url)
        report.stage = "metadata"
        report.metadata = await read_metadata(http, url, report)
        report.stage = "tasks"
        report.tasks = await asyncio.to_thread(
            read_tasks, url, options.timeout_s, report
        )
        report.stage = "schema"
        raw_action = await raw_action_schema(http, url)
    spec = await fetch_action_spec(client, url, options.timeout_s)
    report.action = action_summary(spec, raw_action)
    if spec.is_mcp:
        rpc = isinstance(client, SessionRpcClient)
        report.action["mcp_route"] = "session_rpc" if rpc else "step"
        report.tools = [tool_summary(t) for t in spec.tools or ()]

    report.stage = "reset"
    await asyncio.to_thread(check_reset_keys, options, report)
    first = await stage_call(
        "reset", client.reset(**options.reset), options.timeout_s, client
    )
    if spec.is_mcp:
        # As a rollout does: an env may start its tool server in reset.
        spec = await relist_tools(client, url, spec, options.timeout_s)
        report.tools = [tool_summary(t) for t in spec.tools or ()]
        if not spec.tools:
            raise StageFailed(
                "the MCP env lists no tools after reset: the model could not act "
                "(every call would be refused as an unknown tool)"
            )
    turns = TurnRenderer(
        images=options.observation_images, max_chars=options.max_observation_chars
    )
    opening = await visible_task(client, first.observation or {}, options, report)
    report.reset = {
        "kwargs": options.reset,
        **result_summary(first),
        **turn_summary(turns.opening(opening, spec)),
    }

    action: dict[str, Any] | None = None
    stepped = None
    if options.action is not None and first.done:
        report.warnings.append("reset reported done, so --action was not stepped")
    elif options.action is not None:
        report.stage = "step"
        try:
            action = parse_action(options.action, spec)
        except InvalidAction as e:
            raise StageFailed(f"--action is not a valid action: {e}") from e
        stepped = await stage_call(
            "step", client.step(action), options.timeout_s, client
        )
        report.step = {
            "action": action,
            **result_summary(stepped),
            **turn_summary(turns.observation(stepped.observation or {})),
        }

    # The rollout's session is done: free its slot (the server keeps running) so the
    # fresh sessions below fit on a server that allows only one.
    await client.disconnect()
    session = EnvTarget(base_url=url, connect_timeout_s=target.connect_timeout_s)
    report.stage = "seed check"
    report.seed_check = await seed_check(
        session,
        options,
        result_summary(first),
        action,
        result_summary(stepped) if stepped is not None else None,
    )
    if report.seed_check["status"] == "differs":
        report.warnings.append(
            "the same seed gave different results on two fresh sessions: "
            + ", ".join(report.seed_check["differences"])
        )
    elif report.seed_check["status"] == "error":
        report.warnings.append(f"seed check failed: {report.seed_check['error']}")
    report.stage = "sessions"
    report.sessions = await probe_sessions(session, options)
    if report.sessions["status"] == "reset failed":
        held = report.sessions["accepted"]
        report.warnings.append(
            (
                f"only {held} concurrent session(s) can reset"
                if held
                else "a session after the check's own cannot reset"
            )
            + f": the reset of probe session {held + 1} failed "
            f"({report.sessions['error']}); "
            + (
                "keep the eval's concurrency at that"
                if held
                else "the server may "
                "take one reset per process: a server per rollout (Docker) avoids it"
            )
        )
    report.stage = "cleanup"


def _launch_line(target: EnvTarget) -> str:
    if target.base_url:
        return f"connecting to {target.base_url} ..."
    if target.launcher != "uv":
        how = launcher_label(target.launcher)
        return f"launching {target.env} with {how} (up to {target.launch_timeout_s:.0f}s) ..."
    where = target.provider_kwargs.get("project_path") or "its Space repo (git clone)"
    return (
        f"launching {target.env} with UV from {where} "
        f"(up to {target.launch_timeout_s:.0f}s) ..."
    )
