"""The human-readable form of a `CheckReport`: a row per finding, each rendered from
its stage's typed summary."""

from __future__ import annotations

import json
from typing import Any

from openenv_v1.cli.check_report import (
    ActionInfo,
    AppServed,
    CheckReport,
    DockerRun,
    Played,
    SeedCheck,
    Sessions,
    Tasks,
    schema_fields,
)
from openenv_v1.core.episode.mcp_route import RPC_ROUTE_NOTE
from openenv_v1.core.episode.schema import Tool
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.episode.view import metadata_shown
from openenv_v1.core.manifest import Manifest

_WIDTH = 12
_OBSERVATION_CHARS = 400


def _row(label: str, text: str) -> list[str]:
    first, *rest = text.splitlines() or [""]
    pad = " " * _WIDTH
    return [f"{label:<{_WIDTH}}{first}", *(pad + line for line in rest)]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)


def _clip(text: str, limit: int = _OBSERVATION_CHARS) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} chars; --json shows all)"


def _target_text(target: dict[str, Any]) -> str:
    if target.get("base_url"):
        return f"{target['base_url']} (a running server: connect only)"
    kwargs = target.get("provider_kwargs") or {}
    provider = target.get("provider")
    if provider not in (None, "uv"):
        how = "Docker" if provider == "docker" else f"provider {provider}"
        return f"{target['env']} ({how} launch)"
    where = kwargs.get("project_path") or "its Space repo"
    app = kwargs.get("app") or "chosen from the project's files"
    return f"{target['env']} (UV launch from {where}, app {app})"


def docker_lines(docker: DockerRun) -> list[str]:
    """The `image`, `build` and `container` lines of a Docker launch."""
    lines = _row("image", f"{docker.image}  ({docker.source})")
    build = {
        "built": f"built in {docker.build_s}s",
        "reused": f"reused (its files unchanged; {docker.build_s}s to find)",
    }.get(docker.build, f"none ({docker.source}: run as it is)")
    lines += _row("build", build)
    short_id = (docker.container_id or "")[:12]
    if docker.published is None:  # the internal network: no port published
        reached = (
            f"on network {docker.network} at {docker.address} (no egress, "
            "nothing published)"
        )
    else:
        reached = f"published {docker.published} -> {docker.container_port}/tcp"
    lines += _row(
        "container",
        f"{docker.container} (id {short_id}), {reached}, user "
        f"{docker.user or 'of the image'}, ready in {docker.ready_s}s",
    )
    return lines


def _field_line(spec: dict[str, Any]) -> str:
    """One entry of `schema_fields`."""
    required = " (required)" if spec["required"] else ""
    about = f"  {spec['description']}" if spec["description"] else ""
    return f"{spec['name']}: {spec['type']}{required}{about}"


def _tool_line(tool: Tool) -> str:
    args = ", ".join(
        f"{a['name']}: {a['type']}{'' if a['required'] else '?'}"
        for a in schema_fields(tool.input_schema)
    )
    about = f"  {tool.description}" if tool.description else ""
    return f"{tool.name}({args}){about}"


def model_gets_text(turn: Turn) -> str:
    """`1,234 chars of text + 1 image: screen 210x160x3 (image/png, 7,421 bytes)`,
    then what was left out or cut."""
    images = turn.images
    text = f"{len(turn.text):,} chars of text"
    if images:
        text += f" + {len(images)} image{'s' if len(images) > 1 else ''}: " + ", ".join(
            f"{i.field} {i.shape_text} ({i.mime}, {len(i.encoded()):,} bytes)"
            for i in images
        )
    if omitted := turn.omitted:
        text += "\nimages not shown (observation images off): " + ", ".join(
            f"{i.field} {i.shape_text}" for i in omitted
        )
    if cuts := turn.cuts:
        text += "\ncut to fit the bound: " + ", ".join(
            f"{c.field} ({c.total - c.shown:,} of {c.total:,} chars)" for c in cuts
        )
    return text


def _result_text(result: Played, head: str) -> str:
    outcome = f"reward {result.reward}, done {str(result.done).lower()}"
    observation = result.observation or {}
    text = f"{head} -> {outcome}\nthe model sees: {_clip(result.turn)}"
    text += f"\nthe model gets: {model_gets_text(result.shown)}"
    if (metadata := observation.get("metadata")) and not metadata_shown(observation):
        text += f"\nmetadata (hidden from the model): {_clip(_compact(metadata))}"
    return text


_SEED_TEXTS = {
    "honoured": "honoured: seed 1 twice gave the same reset, seed 2 another (rollouts "
    "of a group share their start)",
    "ignored": "ignored: seeds 1 and 2 gave the same reset (the seed changes nothing "
    "the reset shows; pass --reset with a seed to compare a step)",
    "not honoured": "NOT honoured: seed 1 twice gave different resets ({differences}); "
    "rollouts of a group will not share their start",
    "differs": "DIFFERS on two fresh sessions: {differences}",
    "error": "error: {error}",
}


def _seed_text(seed: SeedCheck) -> str:
    if seed.status == "match":
        what = " and ".join(seed.compared)
        note = "" if "step" in seed.compared else " (add --action to compare a step)"
        return f"match: same {what} results on two fresh sessions{note}"
    differences = ", ".join(seed.differences or ())
    return _SEED_TEXTS[seed.status].format(differences=differences, error=seed.error)


def manifest_text(manifest: Manifest) -> str:
    """What the env's openenv.yaml declares, one line each."""
    lines = [str(manifest.path)]
    if manifest.reward.range:
        low, high = manifest.reward.range
        lines.append(f"reward range [{low}, {high}] (rewards outside are flagged)")
    resources = manifest.resources.model_dump(exclude_none=True)
    budget = resources.pop("episode_timeout_s", None)
    if budget is not None:
        lines.append(f"episode budget {budget}s (unless episode_timeout_s is set)")
    if resources:
        shown = ", ".join(f"{k} {v}" for k, v in resources.items())
        lines.append(f"resources {shown} (default container limits)")
    network = manifest.network.mode
    if network == "allowlist":
        network += ": " + ", ".join(manifest.network.allowed_hosts)
    lines.append(f"network {network}")
    creds = manifest.execution.requires_credentials
    if creds:
        names = ", ".join(creds) if isinstance(creds, list) else "unnamed"
        lines.append(f"requires credentials ({names}): pass them with forward_env")
    return "\n".join(lines)


def tasks_text(tasks: Tasks) -> str:
    """The Task API's splits and what a taskset without `resets` runs."""
    if not tasks.offered:
        return (
            "no Task API (404/501): a taskset runs its `resets`, by default one "
            "empty reset"
        )
    splits = ", ".join(
        f"{s.name} ({tasks.num_tasks[s.name]:,} tasks)" for s in tasks.splits
    )
    return (
        f"Task API: {splits}\nwithout `resets` a taskset runs the env's tasks of "
        f"split {tasks.split} (set `split` for another)"
    )


_SESSIONS_TEXTS = {
    "refused": "max {s.max_sessions} concurrent (session {next} was refused with "
    "CAPACITY_REACHED{busy})",
    "all accepted": "at least {s.at_least} concurrent (all probe sessions accepted; "
    "--probe-sessions N probes further)",
    "reset failed": "{accepted} concurrent (session {next} opened but its reset "
    "failed: {s.error})",
    "unknown": "unknown (probe stopped after {accepted}: {s.error})",
    "not probed": "not probed (--probe-sessions 0)",
}


def _sessions_text(sessions: Sessions) -> str:
    accepted = sessions.accepted or 0
    others = (sessions.active_at_refusal or 0) - accepted
    busy = f"; {others} held by other clients" if others > 0 else ""
    return _SESSIONS_TEXTS[sessions.status].format(
        s=sessions, accepted=accepted, next=accepted + 1, busy=busy
    )


def _app_text(app: AppServed) -> str:
    choice = app.choice
    shown = [f"{choice.app if choice else None}  ({choice.source if choice else None})"]
    shown += [f"  not importable: {c.app}: {why}" for c, why in app.failed]
    if app.gradio_hidden:
        shown.append("  gradio hidden (the env does not declare it; --web-ui)")
    return "\n".join(shown)


def _metadata_text(meta: dict[str, Any]) -> str:
    name = " ".join(str(meta[k]) for k in ("name", "version") if k in meta)
    about = f": {meta['description']}" if meta.get("description") else ""
    return f"{name}{about}" if meta else "(none published)"


def _action_text(action: ActionInfo) -> str:
    if action.spec.is_mcp:
        shown = f"MCP tool calls (server action {action.title})"
        if action.mcp_route == "session_rpc":
            shown += f"\n  {RPC_ROUTE_NOTE}"
        return shown
    lines = [str(action.title or "(untitled)")]
    lines += [f"  {_field_line(f)}" for f in action.fields]
    if raw_field := action.spec.raw_field:
        lines.append(f"  a reply that is not JSON is taken as `{raw_field}`")
    return "\n".join(lines)


def _found_lines(report: CheckReport) -> list[str]:
    """A row per finding, in the order a reader meets them."""
    lines: list[str] = []
    if report.server_url:
        verb = "connected" if report.target.get("base_url") else "up"
        lines += _row("server", f"{report.server_url}  ({verb} in {report.launch_s}s)")
    if report.app:
        lines += _row("app", _app_text(report.app))
    if report.docker:
        lines += docker_lines(report.docker)
    if report.health:
        lines += _row("health", report.health)
    if report.server_url and report.stage not in ("launch", "connect", "health"):
        lines += _row("metadata", _metadata_text(report.metadata or {}))
    if report.manifest:
        lines += _row("manifest", manifest_text(report.manifest))
    if report.tasks:
        lines += _row("tasks", tasks_text(report.tasks))
    if report.action:
        lines += _row("action", _action_text(report.action))
    if report.tools is not None:
        lines += _row("tools", "\n".join(_tool_line(t) for t in report.tools) or "none")
    if report.reset:
        lines += _row(
            "reset", _result_text(report.reset, _compact(report.reset.kwargs))
        )
    if report.step:
        lines += _row("step", _result_text(report.step, _compact(report.step.action)))
    if report.seed_check:
        lines += _row("seed check", _seed_text(report.seed_check))
    if report.sessions:
        lines += _row("sessions", _sessions_text(report.sessions))
    return lines


def render_report(report: CheckReport) -> str:
    lines = [f"openenv-v1 check: {_target_text(report.target)}", *_found_lines(report)]
    for warning in report.warnings:
        lines += _row("warning", warning)
    if report.failure is None:
        lines += _row("result", f"OK ({report.elapsed_s}s)")
    else:
        failure = report.failure
        lines += _row(
            "result",
            f"FAILED at {failure.stage} ({report.elapsed_s}s):\n{failure.error}",
        )
        if failure.hint:
            lines += _row("hint", failure.hint)
    return "\n".join(lines)
