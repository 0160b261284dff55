"""The stages of `openenv-v1 check` on the rollout's own session: what the server
serves (health, metadata, the Task API, the action schema and tools), then the reset
(its kwargs, and the task the model is shown) and one step; `CheckRun`, what the
stages share, and how a stage's call fails (`StageFailed`, `stage_call`).

Each stage is `async (CheckRun) -> summary`, the value `check.py`'s table puts in
the report; a stage adds warnings to the report itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from openenv_v1.cli.check_report import (
    ActionInfo,
    CheckOptions,
    CheckReport,
    FieldInfo,
    ResetPlayed,
    Split,
    StepPlayed,
    Tasks,
    ToolInfo,
    played,
)
from openenv_v1.cli.flags import CHECK_FLAGS
from openenv_v1.core.episode.actions import InvalidAction, parse_action
from openenv_v1.core.episode.env_source import env_source_dir, read_reset_params
from openenv_v1.core.episode.mcp_route import SessionRpcClient, locked_core_version
from openenv_v1.core.episode.schema import ActionSpec, fetch_action_spec, relist_tools
from openenv_v1.core.episode.turns import TurnRenderer
from openenv_v1.core.episode.view import (
    reset_refusal,
    said_failure,
    shows_nothing,
    task_from_state,
)
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_details,
    server_error_message,
)
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
    stages opened (the rollout's session `client` at `url`, an HTTP client) or found
    (the action spec, the reset's and the step's results)."""

    options: CheckOptions
    report: CheckReport
    stack: contextlib.AsyncExitStack
    progress: Callable[[str], None]
    client: Any = None
    url: str = ""
    http: httpx.AsyncClient = field(init=False)
    spec: ActionSpec = field(init=False)
    raw_action: dict[str, Any] = field(default_factory=dict)
    first: Any = None
    action: dict[str, Any] | None = None
    stepped: Any = None

    @property
    def timeout_s(self) -> float:
        return self.options.timeout_s

    @property
    def turns(self) -> TurnRenderer:
        return TurnRenderer(
            images=self.options.observation_images,
            max_chars=self.options.max_observation_chars,
        )


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
    return await asyncio.to_thread(_read_tasks, run.url, run.timeout_s, run.report)


def _read_tasks(url: str, timeout_s: float, report: CheckReport) -> Tasks:
    none = Tasks(offered=False, splits=(), taskset_uses="default reset")
    try:
        api = read_task_api(url, timeout_s)
        if api is None:
            return none
        splits = tuple(Split(s.name, s.type, api.num_tasks(s.name)) for s in api.splits)
        chosen = api.choose_split(None)
    except EnvFailure as e:
        report.warnings.append(f"the Task API failed: {e}")
        return none
    return Tasks(True, splits, "env tasks", env_name=api.env_name, split=chosen)


async def read_schema(run: CheckRun) -> ActionInfo:
    """The action contract as a rollout reads it; for an MCP env, its tools too, and
    whether its calls go as steps or as the session's JSON-RPC."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
        # `fetch_action_spec` replaces an MCP env's schema with the call-tool
        # format; the server's own title is worth showing.
        run.raw_action = dict(
            (await run.http.get(f"{run.url}/schema")).json()["action"]
        )
    run.spec = spec = await fetch_action_spec(run.client, run.url, run.timeout_s)
    hidden = frozenset(set(spec.schema.get("properties") or {}) - set(spec.fields))
    route = None
    if spec.is_mcp:
        route = "session_rpc" if isinstance(run.client, SessionRpcClient) else "step"
        run.report.tools = tool_infos(spec)
    return ActionInfo(
        title=run.raw_action.get("title") or spec.schema.get("title"),
        mcp=spec.is_mcp,
        fields=_fields(spec.schema, hidden),
        raw_field=spec.raw_field,
        schema=run.raw_action or spec.schema,
        mcp_route=route,
    )


def type_label(spec: dict[str, Any]) -> str:
    """A short type name for a JSON-schema property: `string`, `integer | null`,
    `array[string]`, `one of "a", "b"`, a `$ref` target's name."""
    if not isinstance(spec, dict) or not spec:
        return "any"
    if isinstance(ref := spec.get("$ref"), str):
        return ref.rsplit("/", 1)[-1]
    if "const" in spec:
        return f"const {json.dumps(spec['const'])}"
    if spec.get("enum"):
        return "one of " + ", ".join(json.dumps(v) for v in spec["enum"])
    if options := spec.get("anyOf") or spec.get("oneOf"):
        return " | ".join(type_label(o) for o in options)
    kind = spec.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), dict):
        return f"array[{type_label(spec['items'])}]"
    return str(kind or "any")


def _fields(schema: dict[str, Any], hidden: frozenset[str]) -> tuple[FieldInfo, ...]:
    required = set(schema.get("required") or ())
    return tuple(
        FieldInfo(
            name=name,
            type=type_label(prop),
            required=name in required,
            description=(prop.get("description") or "")
            if isinstance(prop, dict)
            else "",
        )
        for name, prop in (schema.get("properties") or {}).items()
        if name not in hidden
    )


def tool_infos(spec: ActionSpec) -> tuple[ToolInfo, ...]:
    return tuple(
        ToolInfo(
            t.name, t.description, _fields(t.input_schema, frozenset()), t.input_schema
        )
        for t in spec.tools or ()
    )


async def play_reset(run: CheckRun) -> ResetPlayed:
    """reset(**reset) on the rollout's session, and the turn the model gets of it; an
    MCP env's tools listed again after it, as a rollout does (an env may start its
    tool server in reset)."""
    options, report = run.options, run.report
    await asyncio.to_thread(_check_reset_keys, options, report)
    try:
        run.first = first = await stage_call(
            "reset", run.client.reset(**options.reset), run.timeout_s, run.client
        )
    except StageFailed as e:
        raise StageFailed(await _explained(run, str(e), False)) from e
    if refusal := reset_refusal(first.observation or {}, bool(first.done)):
        raise StageFailed(
            await _explained(
                run, f"{refusal}; no episode can be played (a rollout fails here)", True
            )
        )
    await _warn_lacking_credentials(run)
    if run.spec.is_mcp:
        run.spec = await relist_tools(run.client, run.url, run.spec, run.timeout_s)
        report.tools = tool_infos(run.spec)
        if not run.spec.tools:
            raise StageFailed(
                "the MCP env lists no tools after reset: the model could not act "
                "(every call would be refused as an unknown tool)"
            )
    opening = await _visible_task(run, first.observation or {})
    turn = run.turns.opening(opening, run.spec)
    return ResetPlayed(*played(first, turn), kwargs=options.reset)


def steps(run: CheckRun) -> bool:
    """Whether the check steps: an `--action` was given and the reset left the
    episode running."""
    return run.options.action is not None and not run.first.done


async def play_step(run: CheckRun) -> StepPlayed:
    """One `--action`, parsed like a model reply, stepped; and its turn."""
    assert run.options.action is not None
    try:
        run.action = action = parse_action(run.options.action, run.spec)
    except InvalidAction as e:
        raise StageFailed(f"--action is not a valid action: {e}") from e
    try:
        run.stepped = stepped = await stage_call(
            "step", run.client.step(action), run.timeout_s, run.client
        )
    except StageFailed as e:
        raise StageFailed(await _explained(run, str(e), False)) from e
    observation = stepped.observation or {}
    if said := said_failure(observation):
        raise StageFailed(
            await _explained(run, f"the env's step failed: {said}", False)
        )
    shown = json.dumps(observation, default=str)
    if named := named_in(shown, await asyncio.to_thread(_lacking, run)):
        names = ", ".join(v.name for v in named)
        raise StageFailed(
            await _explained(
                run, f"the step's reply names {names}: {shown[:300]}", False
            )
        )
    turn = run.turns.observation(observation)
    return StepPlayed(*played(stepped, turn), action=action)


def _lacking(run: CheckRun) -> tuple[EnvVariable, ...]:
    """The variables the env folder says it reads that this check does not pass."""
    target = run.options.target
    passed = passed_variables(target.provider_kwargs, target.secret_env)
    return lacking_variables(env_source_dir(target), passed)


async def _explained(run: CheckRun, text: str, at_reset: bool) -> str:
    """`text` with what the launch lacks (`env_project.explain_lacking`), as a
    rollout's failure says it."""
    target = run.options.target
    return await asyncio.to_thread(
        explain_lacking,
        text,
        at_reset,
        source_dir=env_source_dir(target),
        passed=passed_variables(target.provider_kwargs, target.secret_env),
    )


async def _warn_lacking_credentials(run: CheckRun) -> None:
    """A reset that played: still name the credentials the env reads and this check
    does not pass (an env may need one only on a step, or in a tool)."""
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


def _check_reset_keys(options: CheckOptions, report: CheckReport) -> None:
    """Warn about reset kwargs the env's `reset` does not take (OpenEnv's server drops
    them silently), when the env's source is local and can tell."""
    source = env_source_dir(options.target)
    params = read_reset_params(source) if source else None
    unknown = params.unknown(options.reset) if params else []
    if params and unknown:
        report.warnings.append(
            f"reset kwarg{'s' if len(unknown) > 1 else ''} "
            + ", ".join(repr(k) for k in unknown)
            + f" not taken by the env's reset ({params.where}); OpenEnv drops "
            + ("them" if len(unknown) > 1 else "it")
            + " without telling the env"
        )


async def _visible_task(run: CheckRun, observation: dict[str, Any]) -> dict[str, Any]:
    """The reset observation as a rollout shows it: when it shows the model nothing,
    the env's session state (less answer-like fields) instead, with a warning that
    says so; a failure when the state has nothing to show either (the task would
    never reach the model)."""
    if not shows_nothing(observation):
        return observation
    source = env_source_dir(run.options.target)
    core = locked_core_version(source) if source else None
    server = f"its openenv-core {core} server" if core else "the server"
    why = (
        f"the reset observation shows the model nothing: {server} sent no "
        "`metadata` (openenv-core 0.2.3 and 0.3.0 servers strip it from /ws replies; "
        "an env that puts its task there loses it on the wire)"
    )
    try:
        state = await stage_call("state", run.client.state(), run.timeout_s)
    except StageFailed as e:
        state, why = {}, f"{why}; the session's state cannot be read ({e})"
    shown, hidden = task_from_state(state)
    if not shown:
        # A warning, not a failure: a tools-only env (echo_env) has no task to show.
        run.report.warnings.append(
            f"{why}, and the session's state has nothing to show either: the task "
            "never reaches the model, only the action format does (an env of yours: "
            "put the task in an observation field)"
        )
        return observation
    kept = (
        f"; kept from the model as answer-like: {', '.join(hidden)}" if hidden else ""
    )
    run.report.warnings.append(
        f"{why}; the model is shown the env's session state instead (the `state` "
        f"message): {', '.join(shown)}{kept}"
    )
    return {**observation, **shown}


async def stage_call(
    what: str, call: Awaitable[Any], timeout_s: float, client: Any = None
) -> Any:
    try:
        return await asyncio.wait_for(call, timeout_s)
    except TimeoutError as e:
        raise StageFailed(f"{what} did not answer within {timeout_s:.0f}s") from e
    except Exception as e:
        if code := server_error_code(e):
            details = server_error_details(client) if client is not None else None
            extra = f" ({details})" if details else ""
            raise StageFailed(
                f"{what} was refused by the server ({code}): "
                f"{server_error_message(e)}{extra}"
            ) from e
        raise StageFailed(f"{what} failed: {describe(e)}") from e
