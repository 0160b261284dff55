"""The stages of `openenv-v1 check` on the rollout's own episode (`EnvEpisode`):
what the server serves, the action contract, the reset and one step. Each stage is
`async (CheckRun) -> summary` (`check.py`'s `STAGES`) and adds its warnings to the
report; what is here is check's alone: the reads of the server's endpoints, the
findings about the env folder, and the stricter verdicts a check gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from openenv_v1.cli.check_report import (
    ActionInfo,
    CheckOptions,
    CheckReport,
    ResetPlayed,
    StepPlayed,
    Tasks,
)
from openenv_v1.cli.flags import CHECK_FLAGS
from openenv_v1.core.episode.actions import InvalidAction, parse_action
from openenv_v1.core.episode.env_episode import EnvEpisode
from openenv_v1.core.episode.env_source import env_source_dir
from openenv_v1.core.episode.frames import Frame
from openenv_v1.core.episode.mcp_route import SessionRpcClient, locked_core_version
from openenv_v1.core.episode.reset import OpeningTask
from openenv_v1.core.episode.view import said_failure
from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.launch.env_project import (
    EnvVariable,
    explain_lacking,
    forward_advice,
    lacking_variables,
    named_in,
    passed_variables,
)
from openenv_v1.core.setting_names import render_settings
from openenv_v1.core.tasks import read_task_api


class StageFailed(Exception):
    """The current stage failed; `str()` is the cause."""


@dataclass
class CheckRun:
    """One check's working state: what it was asked, its report, and what earlier
    stages opened (the rollout's `episode`, its server at `url`, an HTTP client) or
    found (the server's own action schema, the frames of the reset and the step)."""

    options: CheckOptions
    report: CheckReport
    stack: contextlib.AsyncExitStack
    progress: Callable[[str], None]
    episode: EnvEpisode = field(init=False)
    url: str = ""
    http: httpx.AsyncClient = field(init=False)
    raw_action: dict[str, Any] = field(default_factory=dict)
    first: Frame | None = None
    action: dict[str, Any] | None = None
    stepped: Frame | None = None

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_s


async def read_health(run: CheckRun) -> str:
    url = run.url
    try:
        response = await run.http.get(f"{url}/health")
    except httpx.HTTPError as e:
        raise StageFailed(f"GET {url}/health failed: {describe(e)}") from e
    if response.status_code != 200:
        raise StageFailed(
            f"GET {url}/health answered {response.status_code}: {response.text[:300]}"
        )
    with contextlib.suppress(ValueError, AttributeError):
        return str(response.json().get("status") or "ok")
    return "ok"


async def read_metadata(run: CheckRun) -> dict[str, Any] | None:
    """The env's `/metadata` (name, version, ...), or None when it has none."""
    try:
        response = await run.http.get(f"{run.url}/metadata")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as e:
        run.report.warnings.append(f"GET {run.url}/metadata failed: {describe(e)}")
        return None
    if not isinstance(body, dict):
        return None
    return {k: v for k, v in body.items() if v not in (None, "")}


async def read_tasks(run: CheckRun) -> Tasks:
    """The server's Task API and what a taskset without `resets` would run."""
    return await asyncio.to_thread(_read_tasks, run)


def _read_tasks(run: CheckRun) -> Tasks:
    none = Tasks(offered=False, splits=(), taskset_uses="default reset")
    try:
        api = read_task_api(run.url, run.timeout_s)
        if api is None:
            return none
        counts = {s.name: api.num_tasks(s.name) for s in api.splits}
        chosen = api.choose_split(None)
    except EnvFailure as e:
        run.report.warnings.append(f"the Task API failed: {e}")
        return none
    return Tasks(
        True, api.splits, "env tasks", counts, env_name=api.env_name, split=chosen
    )


async def read_schema(run: CheckRun) -> ActionInfo:
    """The action contract the episode read; for an MCP env, its tools too, and
    whether its calls go as steps or as the session's JSON-RPC."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
        # An MCP env's spec is the call-tool format: the server's title is shown.
        run.raw_action = dict(
            (await run.http.get(f"{run.url}/schema")).json()["action"]
        )
    spec, route = run.episode.spec, None
    if spec.is_mcp:
        rpc = isinstance(run.episode.client, SessionRpcClient)
        route = "session_rpc" if rpc else "step"
        run.report.tools = spec.tools
    return ActionInfo(
        title=run.raw_action.get("title") or spec.schema.get("title"),
        spec=spec,
        schema=run.raw_action or spec.schema,
        mcp_route=route,
    )


async def play_reset(run: CheckRun) -> ResetPlayed:
    """The episode's reset(**reset) and the model's turn; an MCP env's tools as the
    episode listed them again after it (none fails the check)."""
    options, report, episode = run.options, run.report, run.episode
    try:
        turn = await episode.reset(options.reset)
    except EnvFailure as e:
        raise StageFailed(await _explained(run, str(e))) from e
    _warn_unknown_keys(run)
    if episode.report.ended_at_reset:
        raise StageFailed(str(episode.report.error))
    run.first = first = episode.frame
    assert first is not None
    await _warn_lacking_credentials(run)
    if episode.spec.is_mcp:
        report.tools = episode.spec.tools
        if not episode.spec.tools:
            raise StageFailed(
                "the MCP env lists no tools after reset: the model could not act "
                "(every call would be refused as an unknown tool)"
            )
    _warn_hidden_task(run, episode.task)
    return ResetPlayed(first, turn, kwargs=options.reset)


def steps(run: CheckRun) -> bool:
    """Whether an `--action` was given and the reset left the episode running."""
    return run.options.action is not None and not run.episode.report.done


async def play_step(run: CheckRun) -> StepPlayed:
    """One `--action`, parsed like a model reply and applied by the episode; a
    reply that says it failed or names a variable the check lacks fails it."""
    assert run.options.action is not None
    episode = run.episode
    try:
        run.action = action = parse_action(run.options.action, episode.spec)
    except InvalidAction as e:
        raise StageFailed(f"--action is not a valid action: {e}") from e
    steps_before = episode.report.steps
    turn = await episode.apply(action)
    if episode.report.steps == steps_before:  # not stepped, or no answer
        if episode.report.error is not None:  # explained by the episode already
            raise StageFailed(episode.report.error)
        raise StageFailed(f"--action was refused: {episode.refused}")
    run.stepped = stepped = episode.frame
    assert stepped is not None
    observation = stepped.observation
    if said := said_failure(observation):
        raise StageFailed(await _explained(run, f"the env's step failed: {said}"))
    shown = json.dumps(observation, default=str)
    if named := named_in(shown, await asyncio.to_thread(_lacking, run)):
        names = ", ".join(v.name for v in named)
        raise StageFailed(
            await _explained(run, f"the step's reply names {names}: {shown[:300]}")
        )
    return StepPlayed(stepped, turn, action=action)


def _lacking(run: CheckRun) -> tuple[EnvVariable, ...]:
    """The variables the env folder says it reads that this check does not pass."""
    target = run.options.target
    passed = passed_variables(target.provider_kwargs, target.secret_env)
    return lacking_variables(env_source_dir(target), passed)


def explainer(options: CheckOptions) -> Callable[[str, bool], str]:
    """The check's episode's `explain`, as a rollout's: a failure's text with what
    the launch lacks (`env_project.explain_lacking`)."""
    target = options.target
    return functools.partial(
        explain_lacking,
        source_dir=env_source_dir(target),
        passed=passed_variables(target.provider_kwargs, target.secret_env),
    )


async def _explained(run: CheckRun, text: str) -> str:
    """`text`, a failure, with the variables it names that the launch lacks."""
    return await asyncio.to_thread(run.episode.explain, text, False)


async def _warn_lacking_credentials(run: CheckRun) -> None:
    """Name the credentials the env reads and the check does not pass, also when
    the reset played (an env may need one only on a step, or in a tool)."""
    credentials = [v for v in await asyncio.to_thread(_lacking, run) if v.credential]
    if credentials:
        run.report.warnings.append(
            render_settings(
                f"{forward_advice(credentials)}; the reset played without "
                f"{'it' if len(credentials) == 1 else 'them'}, but an episode that "
                "needs one will fail",
                CHECK_FLAGS,
            )
        )


def _warn_unknown_keys(run: CheckRun) -> None:
    """The reset kwargs the episode found its env's `reset` does not take."""
    params, unknown = run.episode.reset_params, run.episode.unknown_keys
    if params is not None and unknown:
        run.report.warnings.append(params.unknown_note(unknown))


def _warn_hidden_task(run: CheckRun, task: OpeningTask) -> None:
    """When the reset observation shows the model nothing: what the episode showed
    instead (its session state), or that the task never reaches the model."""
    if task.source == "observation" and not task.shows_nothing:
        return
    source = env_source_dir(run.options.target)
    core = locked_core_version(source) if source else None
    server = f"its openenv-core {core} server" if core else "the server"
    why = (
        f"the reset observation shows the model nothing: {server} sent no "
        "`metadata` (openenv-core 0.2.3 and 0.3.0 servers strip it from /ws replies; "
        "an env that puts its task there loses it on the wire)"
    )
    if task.state_error is not None:
        why += f"; the session's state cannot be read ({task.state_error})"
    if task.source == "observation":
        # A warning, not a failure: a tools-only env (echo_env) has no task to show.
        run.report.warnings.append(
            f"{why}, and the session's state has nothing to show either: the task "
            "never reaches the model, only the action format does (an env of yours: "
            "put the task in an observation field)"
        )
        return
    hidden = task.hidden
    kept = (
        f"; kept from the model as answer-like: {', '.join(hidden)}" if hidden else ""
    )
    run.report.warnings.append(
        f"{why}; the model is shown the env's session state instead (the `state` "
        f"message): {', '.join(task.shown)}{kept}"
    )
