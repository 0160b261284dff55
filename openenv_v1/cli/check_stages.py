"""The stages of `openenv-v1 check` that read what the server serves: health,
metadata, the Task API, the action schema and tools, the reset's kwargs and the task
the model is shown; and how a stage's call fails (`StageFailed`, `stage_call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable
from typing import Any

import httpx

from openenv_v1.cli.check_report import CheckOptions, CheckReport
from openenv_v1.core.episode.env_source import env_source_dir, read_reset_params
from openenv_v1.core.episode.mcp_route import locked_core_version
from openenv_v1.core.episode.schema import ActionSpec
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.episode.view import shows_nothing, task_from_state
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_details,
    server_error_message,
)
from openenv_v1.core.tasks import read_task_api


class StageFailed(Exception):
    """The current stage failed; `str()` is the cause."""


async def read_health(http: httpx.AsyncClient, url: str) -> str:
    try:
        response = await http.get(f"{url}/health")
    except httpx.HTTPError as e:
        raise StageFailed(f"GET {url}/health failed: {describe(e)}") from e
    if response.status_code != 200:
        raise StageFailed(
            f"GET {url}/health answered {response.status_code}: {response.text[:300]}"
        )
    with contextlib.suppress(ValueError, AttributeError):
        return str(response.json().get("status") or "ok")
    return "ok"


async def read_metadata(
    http: httpx.AsyncClient, url: str, report: CheckReport
) -> dict[str, Any] | None:
    """The env's `/metadata` (name, version, ...), or None when it has none."""
    try:
        response = await http.get(f"{url}/metadata")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        body = response.json()
    except (httpx.HTTPError, ValueError) as e:
        report.warnings.append(f"GET {url}/metadata failed: {describe(e)}")
        return None
    if not isinstance(body, dict):
        return None
    return {k: v for k, v in body.items() if v not in (None, "")}


def read_tasks(url: str, timeout_s: float, report: CheckReport) -> dict[str, Any]:
    """The server's Task API and what a taskset without `resets` would run."""
    try:
        api = read_task_api(url, timeout_s)
        if api is None:
            return {"offered": False, "splits": [], "taskset_uses": "default reset"}
        splits = [
            {"name": s.name, "type": s.type, "num_tasks": api.num_tasks(s.name)}
            for s in api.splits
        ]
        chosen = api.choose_split(None)
    except EnvFailure as e:
        report.warnings.append(f"the Task API failed: {e}")
        return {"offered": False, "splits": [], "taskset_uses": "default reset"}
    return {
        "offered": True,
        "env_name": api.env_name,
        "splits": splits,
        "split": chosen,
        "taskset_uses": "env tasks",
    }


async def raw_action_schema(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    """The server's own action schema; `fetch_action_spec` replaces an MCP env's with
    the call-tool format, and the original title is worth showing."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError):
        response = await http.get(f"{url}/schema")
        return dict(response.json()["action"])
    return {}


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


def _fields(schema: dict[str, Any], hidden: frozenset[str]) -> list[dict[str, Any]]:
    required = set(schema.get("required") or ())
    return [
        {
            "name": name,
            "type": type_label(prop),
            "required": name in required,
            "description": (prop.get("description") or "")
            if isinstance(prop, dict)
            else "",
        }
        for name, prop in (schema.get("properties") or {}).items()
        if name not in hidden
    ]


def action_summary(spec: ActionSpec, raw: dict[str, Any]) -> dict[str, Any]:
    hidden = frozenset(set(spec.schema.get("properties") or {}) - set(spec.fields))
    return {
        "title": raw.get("title") or spec.schema.get("title"),
        "mcp": spec.is_mcp,
        "fields": _fields(spec.schema, hidden),
        "raw_field": spec.raw_field,
        "schema": raw or spec.schema,
    }


def tool_summary(tool: Any) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "arguments": _fields(tool.input_schema, frozenset()),
        "input_schema": tool.input_schema,
    }


def check_reset_keys(options: CheckOptions, report: CheckReport) -> None:
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


async def visible_task(
    client: Any,
    observation: dict[str, Any],
    options: CheckOptions,
    report: CheckReport,
) -> dict[str, Any]:
    """The reset observation as a rollout shows it: when it shows the model nothing,
    the env's session state (less answer-like fields) instead, with a warning that
    says so; a failure when the state has nothing to show either (the task would
    never reach the model)."""
    if not shows_nothing(observation):
        return observation
    source = env_source_dir(options.target)
    core = locked_core_version(source) if source else None
    server = f"its openenv-core {core} server" if core else "the server"
    why = (
        f"the reset observation shows the model nothing: {server} sent no "
        "`metadata` (openenv-core 0.2.3 and 0.3.0 servers strip it from /ws replies; "
        "an env that puts its task there loses it on the wire)"
    )
    try:
        state = await stage_call("state", client.state(), options.timeout_s)
    except StageFailed as e:
        state, why = {}, f"{why}; the session's state cannot be read ({e})"
    shown, hidden = task_from_state(state)
    if not shown:
        # A warning, not a failure: a tools-only env (echo_env) has no task to show.
        report.warnings.append(
            f"{why}, and the session's state has nothing to show either: the task "
            "never reaches the model, only the action format does (an env of yours: "
            "put the task in an observation field)"
        )
        return observation
    kept = (
        f"; kept from the model as answer-like: {', '.join(hidden)}" if hidden else ""
    )
    report.warnings.append(
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


def turn_summary(turn: Turn) -> dict[str, Any]:
    """The user turn as the model gets it: its text and a summary (text length,
    images with their encoded size, images left out, fields cut)."""
    return {"turn": turn.text, "model_gets": turn.summary()}


def result_summary(result: Any) -> dict[str, Any]:
    return {
        "observation": result.observation,
        "reward": result.reward,
        "done": bool(result.done),
    }
