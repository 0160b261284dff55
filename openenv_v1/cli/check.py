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

Nothing here imports verifiers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx

from openenv_v1.cli.hints import hint_for
from openenv_v1.core.episode.actions import InvalidAction, parse_action
from openenv_v1.core.episode.env_source import env_source_dir, read_reset_params
from openenv_v1.core.episode.images import find_images
from openenv_v1.core.episode.mcp_route import (
    SessionRpcClient,
    locked_core_version,
    route_mcp_steps,
)
from openenv_v1.core.episode.schema import ActionSpec, fetch_action_spec, relist_tools
from openenv_v1.core.episode.turns import Turn, TurnRenderer
from openenv_v1.core.episode.view import shows_nothing, task_from_state
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    keep_error_frames,
    server_error_code,
    server_error_details,
    server_error_message,
)
from openenv_v1.core.http_client import http_base
from openenv_v1.core.launch.plan import launcher_label
from openenv_v1.core.launch.target import EnvTarget, open_env
from openenv_v1.core.manifest import ManifestError, read_manifest
from openenv_v1.core.tasks import read_task_api

_CAPACITY = re.compile(r"(?P<active>\d+)/(?P<max>\d+) sessions")
# How long a fresh session retries a server still counting a session just closed.
_CAPACITY_RETRY_S = 5.0


@dataclass(frozen=True)
class CheckOptions:
    target: EnvTarget
    reset: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    """A reply as a model would write it: a JSON action, or bare text for an action
    with one required string field."""
    probe_sessions: int = 4
    """Concurrent sessions to try at most; 0 skips the probe."""
    timeout_s: float = 60.0
    """Per reset / step / HTTP call."""
    observation_images: bool = True
    """As `task.user.observation_images`: send image fields as images."""
    max_observation_chars: int = 8_000
    """As `task.user.max_observation_chars`: the bound on a turn's text."""


@dataclass
class Failure:
    stage: str
    error: str
    hint: str | None


@dataclass
class CheckReport:
    """What the check learned; fields stay None for stages it did not reach."""

    target: dict[str, Any]
    stage: str = "start"
    """The stage running, or the one that failed."""
    server_url: str | None = None
    launch_s: float | None = None
    app: dict[str, Any] | None = None
    """For a UV launch: the app served, why it was chosen, candidates that failed."""
    docker: dict[str, Any] | None = None
    """For a Docker launch: the image (and where it came from), its build (built or
    reused, seconds), the container (name, id, published binding, seconds to ready)."""
    health: str | None = None
    metadata: dict[str, Any] | None = None
    manifest: dict[str, Any] | None = None
    """What the env folder's openenv.yaml declares (None: no file, or no
    `validation:` block)."""
    tasks: dict[str, Any] | None = None
    """The Task API: `offered`, its `splits` with their `num_tasks`, and what a
    taskset without `resets` runs (`taskset_uses`)."""
    action: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    reset: dict[str, Any] | None = None
    step: dict[str, Any] | None = None
    seed_check: dict[str, Any] | None = None
    sessions: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    failure: Failure | None = None
    elapsed_s: float | None = None
    launched: Any = field(default=None, repr=False)
    """The launcher (`SupervisedUVProvider`, `DockerLaunch`) while it runs (not
    reported)."""

    @property
    def ok(self) -> bool:
        return self.failure is None

    def fail(self, error: str, reset_keys: bool = True) -> None:
        connects = "base_url" in self.target
        hint = hint_for(self.stage, error, base_url=connects, reset_keys=reset_keys)
        self.failure = Failure(self.stage, error, hint)

    def record_launch(self, provider: Any) -> None:
        """What a launch chose: a UV launch's app (`SupervisedUVProvider`), a Docker
        launch's image, build and container (`DockerLaunch`); other launchers (Swarm,
        cloud sandboxes) report nothing more."""
        self.launched = provider
        from openenv_v1.core.launch.docker.container import DockerLaunch
        from openenv_v1.core.launch.uv import SupervisedUVProvider

        if isinstance(provider, DockerLaunch):
            self.docker = docker_summary(provider)
            return
        if not isinstance(provider, SupervisedUVProvider):
            return
        choice = provider.app_choice
        self.app = {
            "app": choice.app if choice else None,
            "source": choice.source if choice else None,
            "failed": [
                {"app": c.app, "source": c.source, "error": why}
                for c, why in provider.failed_apps
            ],
            "gradio_hidden": provider.gradio_hidden,
        }
        self.warnings += provider.notes

    def to_json(self) -> dict[str, Any]:
        """The report as JSON; image fields of the observations are replaced by
        their size (`{"image": "600x800x3", "pixels": 1440000}`), not their pixels."""
        data = asdict(replace(self, launched=None))
        data.pop("stage")
        data.pop("launched")
        for stage in ("reset", "step"):
            if isinstance(data.get(stage), dict):
                data[stage]["observation"] = sized_images(data[stage]["observation"])
        return {"ok": self.ok, **data}


def sized_images(observation: Any) -> Any:
    """`observation` with each image field (and its shape field) replaced by the
    image's size: a screenshot's pixels are megabytes of JSON."""
    if not isinstance(observation, dict):
        return observation
    shown = dict(observation)
    for image in find_images(observation):
        for name in image.uses:
            shown.pop(name, None)
        shown[image.field] = {
            "image": image.shape_text,
            "pixels": image.height * image.width * image.channels,
        }
    return shown


def docker_summary(provider: Any) -> dict[str, Any]:
    """A ready `DockerLaunch`'s image, build and container, as reported."""
    image = provider.image
    return {
        "image": image.image if image else None,
        "source": image.source if image else None,
        "build": None
        if image is None or image.reused is None
        else ("reused" if image.reused else "built"),
        "build_s": round(image.seconds, 2) if image else None,
        "container": provider.container,
        "container_id": provider.container_id,
        "published": provider.published,
        "network": provider.network,
        "address": provider.address,
        "user": provider.user,
        "container_port": provider.options.container_port,
        "ready_s": None
        if provider.start_seconds is None
        else round(provider.start_seconds, 2),
    }


class StageFailed(Exception):
    """The current stage failed; `str()` is the cause."""


def describe_target(target: EnvTarget) -> dict[str, Any]:
    """The target as shown to the user; `env_vars` values are masked."""
    if target.base_url:
        return {"base_url": target.base_url}
    kwargs = dict(target.provider_kwargs)
    if isinstance(kwargs.get("env_vars"), dict):
        kwargs["env_vars"] = {k: "***" for k in kwargs["env_vars"]}
    return {
        "env": target.env,
        "use_docker": target.use_docker,
        "provider": target.launcher,
        "provider_kwargs": kwargs,
        "launch_timeout_s": target.launch_timeout_s,
    }


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
        report.health = await _health(http, url)
        report.stage = "metadata"
        report.metadata = await _metadata(http, url, report)
        report.stage = "tasks"
        report.tasks = await asyncio.to_thread(_tasks, url, options.timeout_s, report)
        report.stage = "schema"
        raw_action = await _raw_action_schema(http, url)
    spec = await fetch_action_spec(client, url, options.timeout_s)
    report.action = _action_summary(spec, raw_action)
    if spec.is_mcp:
        rpc = isinstance(client, SessionRpcClient)
        report.action["mcp_route"] = "session_rpc" if rpc else "step"
        report.tools = [_tool_summary(t) for t in spec.tools or ()]

    report.stage = "reset"
    await asyncio.to_thread(_check_reset_keys, options, report)
    first = await _call(
        "reset", client.reset(**options.reset), options.timeout_s, client
    )
    if spec.is_mcp:
        # As a rollout does: an env may start its tool server in reset.
        spec = await relist_tools(client, url, spec, options.timeout_s)
        report.tools = [_tool_summary(t) for t in spec.tools or ()]
        if not spec.tools:
            raise StageFailed(
                "the MCP env lists no tools after reset: the model could not act "
                "(every call would be refused as an unknown tool)"
            )
    turns = TurnRenderer(
        images=options.observation_images, max_chars=options.max_observation_chars
    )
    opening = await _visible_task(client, first.observation or {}, options, report)
    report.reset = {
        "kwargs": options.reset,
        **_result(first),
        **_turn(turns.opening(opening, spec)),
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
        stepped = await _call("step", client.step(action), options.timeout_s, client)
        report.step = {
            "action": action,
            **_result(stepped),
            **_turn(turns.observation(stepped.observation or {})),
        }

    # The rollout's session is done: free its slot (the server keeps running) so the
    # fresh sessions below fit on a server that allows only one.
    await client.disconnect()
    session = EnvTarget(base_url=url, connect_timeout_s=target.connect_timeout_s)
    report.stage = "seed check"
    report.seed_check = await _seed_check(
        session,
        options,
        _result(first),
        action,
        _result(stepped) if stepped is not None else None,
    )
    if report.seed_check["status"] == "differs":
        report.warnings.append(
            "the same seed gave different results on two fresh sessions: "
            + ", ".join(report.seed_check["differences"])
        )
    elif report.seed_check["status"] == "error":
        report.warnings.append(f"seed check failed: {report.seed_check['error']}")
    report.stage = "sessions"
    report.sessions = await _probe_sessions(session, options)
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


async def _health(http: httpx.AsyncClient, url: str) -> str:
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


async def _metadata(
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


def _tasks(url: str, timeout_s: float, report: CheckReport) -> dict[str, Any]:
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


async def _raw_action_schema(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
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


def _action_summary(spec: ActionSpec, raw: dict[str, Any]) -> dict[str, Any]:
    hidden = frozenset(set(spec.schema.get("properties") or {}) - set(spec.fields))
    return {
        "title": raw.get("title") or spec.schema.get("title"),
        "mcp": spec.is_mcp,
        "fields": _fields(spec.schema, hidden),
        "raw_field": spec.raw_field,
        "schema": raw or spec.schema,
    }


def _tool_summary(tool: Any) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "arguments": _fields(tool.input_schema, frozenset()),
        "input_schema": tool.input_schema,
    }


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


async def _visible_task(
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
        state = await _call("state", client.state(), options.timeout_s)
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


async def _call(
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


def _turn(turn: Turn) -> dict[str, Any]:
    """The user turn as the model gets it: its text and a summary (text length,
    images with their encoded size, images left out, fields cut)."""
    return {"turn": turn.text, "model_gets": turn.summary()}


def _result(result: Any) -> dict[str, Any]:
    return {
        "observation": result.observation,
        "reward": result.reward,
        "done": bool(result.done),
    }


async def _seed_check(
    session: EnvTarget,
    options: CheckOptions,
    first: dict[str, Any],
    action: dict[str, Any] | None,
    stepped: dict[str, Any] | None,
) -> dict[str, Any]:
    """Repeat the reset (and the action) on a fresh session and compare. Without a
    seed in the reset kwargs: whether the env honours seeds at all."""
    if "seed" not in options.reset:
        return await _seed_honoured(session, options)
    compared = ["reset"] + (["step"] if action is not None else [])
    try:
        async with contextlib.AsyncExitStack() as stack:
            client = route_mcp_steps(
                await open_env(session, stack),
                env_source_dir(options.target),
                options.target.label,
            )
            again = await _retry_capacity(
                lambda: _call("reset", client.reset(**options.reset), options.timeout_s)
            )
            differences = _differences("reset", first, _result(again))
            if action is not None and stepped is not None:
                step = await _call("step", client.step(action), options.timeout_s)
                differences += _differences("step", stepped, _result(step))
    except (StageFailed, EnvFailure) as e:
        return {"status": "error", "compared": compared, "error": str(e)}
    return {
        "status": "differs" if differences else "match",
        "compared": compared,
        "differences": differences,
    }


async def _seeded_reset(
    session: EnvTarget, options: CheckOptions, seed: int
) -> dict[str, Any]:
    """`reset(**reset, seed=seed)` on a fresh session."""
    async with contextlib.AsyncExitStack() as stack:
        client = route_mcp_steps(
            await open_env(session, stack),
            env_source_dir(options.target),
            options.target.label,
        )
        kwargs = {**options.reset, "seed": seed}
        return _result(
            await _retry_capacity(
                lambda: _call("reset", client.reset(**kwargs), options.timeout_s)
            )
        )


async def _seed_honoured(session: EnvTarget, options: CheckOptions) -> dict[str, Any]:
    """Reset with seed 1 on two fresh sessions and with seed 2 on a third: `honoured`
    (seed 1 twice alike, seed 2 different), `ignored` (all alike: the seed changes
    nothing the reset shows) or `not honoured` (seed 1 twice different). Rollouts of
    a group share a start (`shared_seed`) only on an env that honours seeds."""
    try:
        one = await _seeded_reset(session, options, 1)
        again = await _seeded_reset(session, options, 1)
        two = await _seeded_reset(session, options, 2)
    except (StageFailed, EnvFailure) as e:
        return {"status": "error", "compared": ["reset"], "error": str(e)}
    repeat = _differences("reset", one, again)
    if repeat:
        status = "not honoured"
    else:
        status = "honoured" if _differences("reset", one, two) else "ignored"
    return {
        "status": status,
        "compared": ["reset"],
        "seeds": [1, 1, 2],
        "differences": repeat,
    }


async def _retry_capacity(call: Callable[[], Awaitable[Any]]) -> Any:
    """`call()`, retried briefly while the server still counts a session just closed."""
    deadline = time.monotonic() + _CAPACITY_RETRY_S
    while True:
        try:
            return await call()
        except StageFailed as e:
            if "CAPACITY_REACHED" not in str(e) or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)


def _differences(what: str, a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    found = [f"{what}.{k}" for k in ("reward", "done") if a.get(k) != b.get(k)]
    obs_a, obs_b = a.get("observation") or {}, b.get("observation") or {}
    found += [
        f"{what}.observation.{k}"
        for k in sorted(set(obs_a) | set(obs_b))
        if obs_a.get(k) != obs_b.get(k)
    ]
    return found


async def _probe_sessions(session: EnvTarget, options: CheckOptions) -> dict[str, Any]:
    bound = options.probe_sessions
    if bound <= 0:
        return {"status": "not probed"}
    async with contextlib.AsyncExitStack() as stack:
        for held in range(bound):
            # The first probe may still meet the sessions closed just before it.
            patience = _CAPACITY_RETRY_S if held == 0 else 0.0
            try:
                await _open_probe(
                    session, stack, options.timeout_s, patience, options.reset
                )
            except Exception as e:
                code = server_error_code(e)
                if code is not None and code != "CAPACITY_REACHED":
                    return {
                        "status": "reset failed",
                        "accepted": held,
                        "error": f"{code}: {server_error_message(e)}",
                    }
                if code is None:
                    return {"status": "unknown", "accepted": held, "error": describe(e)}
                found = _CAPACITY.search(server_error_message(e))
                return {
                    "status": "refused",
                    "accepted": held,
                    "max_sessions": int(found["max"]) if found else held,
                    "active_at_refusal": int(found["active"]) if found else None,
                }
    return {"status": "all accepted", "accepted": bound, "at_least": bound}


async def _open_probe(
    session: EnvTarget,
    stack: contextlib.AsyncExitStack,
    timeout_s: float,
    patience_s: float,
    reset: dict[str, Any],
) -> None:
    """Open one more session and reset it (as a rollout would), held until `stack`
    closes. The server creates it as the socket opens, so a refusal
    (CAPACITY_REACHED, raised as is) comes with the first message; it is retried for
    `patience_s`. A reset the env refuses is raised too: a session that cannot
    reset is no capacity (BrowserGym's second concurrent reset fails)."""
    client = await open_env(session, stack)
    deadline = time.monotonic() + patience_s
    while True:
        try:
            await asyncio.wait_for(client.reset(**reset), timeout_s)
            return
        except Exception as e:
            code = server_error_code(e)
            if code != "CAPACITY_REACHED" or time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)
