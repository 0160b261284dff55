"""What `openenv-v1 check` was asked (`CheckOptions`) and what it found: each stage's
typed summary (frozen values; a finding the core has a type for, such as `Manifest`,
`ActionSpec`, `Tool`, `Frame` or `Turn`, in that type), `CheckReport` holding them,
and its JSON form (images shown by their size; a `_SPARSE` field left out while it
is None: it belongs to some outcomes of its stage only).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv_v1.cli.flags import CHECK_FLAGS
from openenv_v1.cli.hints import hint_for
from openenv_v1.core.episode.frames import Frame
from openenv_v1.core.episode.images import find_images
from openenv_v1.core.episode.schema import ActionSpec, Tool
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.launch.env_project import AppChoice
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.manifest import Manifest
from openenv_v1.core.setting_names import render_settings
from openenv_v1.core.tasks import Split
from openenv_v1.settings import EpisodeSettings

__all__ = ["CheckOptions", "CheckReport", "describe_target"]

_SPARSE = {"sparse": True}


def _sparse() -> Any:
    return field(default=None, metadata=_SPARSE)


@dataclass(frozen=True)
class CheckOptions:
    """What `check` was asked: the rollout's `target` and `episode` settings (as
    the flags give them), and what the check does on its own."""

    target: EnvTarget
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)
    reset: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    """A reply as a model would write it: a JSON action, or bare text for an action
    with one required string field."""
    probe_sessions: int = 4
    """Concurrent sessions to try at most; 0 skips the probe."""

    @property
    def timeout_s(self) -> float:
        """Per reset, step and HTTP call (`--timeout`)."""
        return self.episode.reset_timeout_s


@dataclass(frozen=True)
class AppServed:
    """A UV launch's app: the one served (`choice`, and why), the candidates that
    could not be imported (each with the line that said so), gradio hidden."""

    choice: AppChoice | None
    failed: tuple[tuple[AppChoice, str], ...]
    gradio_hidden: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "app": self.choice.app if self.choice else None,
            "source": self.choice.source if self.choice else None,
            "failed": [
                {"app": c.app, "source": c.source, "error": why}
                for c, why in self.failed
            ],
            "gradio_hidden": self.gradio_hidden,
        }


@dataclass(frozen=True)
class DockerRun:
    """A Docker launch: the image (and where it came from), its build (built or
    reused, seconds), the container (name, id, published binding, seconds to ready)."""

    image: str | None
    source: str | None
    build: Literal["built", "reused"] | None
    build_s: float | None
    container: str | None
    container_id: str | None
    published: str | None
    network: str | None
    address: str | None
    user: str | None
    container_port: int
    ready_s: float | None

    @classmethod
    def of(cls, provider: Any) -> DockerRun:
        """A ready `DockerLaunch`'s account."""
        image = provider.image
        seconds = provider.start_seconds
        return cls(
            image=image.image if image else None,
            source=image.source if image else None,
            build=None
            if image is None or image.reused is None
            else ("reused" if image.reused else "built"),
            build_s=round(image.seconds, 2) if image else None,
            container=provider.container,
            container_id=provider.container_id,
            published=provider.published,
            network=provider.network,
            address=provider.address,
            user=provider.user,
            container_port=provider.options.container_port,
            ready_s=None if seconds is None else round(seconds, 2),
        )


@dataclass(frozen=True)
class Tasks:
    """The Task API: `offered`, its `splits` with their `num_tasks`, and what a
    taskset without `resets` runs (`taskset_uses`)."""

    offered: bool
    splits: tuple[Split, ...]
    taskset_uses: Literal["env tasks", "default reset"]
    num_tasks: dict[str, int] = field(default_factory=dict)
    env_name: str | None = _sparse()
    split: str | None = _sparse()

    def to_json(self) -> dict[str, Any]:
        data = _fields_json(self)
        data["splits"] = [
            {"name": s.name, "type": s.type, "num_tasks": self.num_tasks.get(s.name)}
            for s in self.splits
        ]
        del data["num_tasks"]
        return data


@dataclass(frozen=True)
class ActionInfo:
    """The action contract as the rollout read it (`spec`), the server's own action
    schema (`schema`, its title), and where an MCP env's calls go."""

    title: str | None
    spec: ActionSpec
    schema: dict[str, Any]
    mcp_route: Literal["session_rpc", "step"] | None = None

    @property
    def fields(self) -> list[dict[str, Any]]:
        """The properties the model fills, as `schema_fields` lists them."""
        hidden = set(self.spec.schema.get("properties") or {}) - set(self.spec.fields)
        return schema_fields(self.spec.schema, frozenset(hidden))

    def to_json(self) -> dict[str, Any]:
        data = {
            "title": self.title,
            "mcp": self.spec.is_mcp,
            "fields": self.fields,
            "raw_field": self.spec.raw_field,
            "schema": self.schema,
        }
        return data | ({"mcp_route": self.mcp_route} if self.mcp_route else {})


def schema_fields(
    schema: dict[str, Any], hidden: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Each property of a JSON schema (less `hidden`): its `name`, a short `type`
    (`type_label`), whether `required`, its `description`."""
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


def _tool_json(tool: Tool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "arguments": schema_fields(tool.input_schema),
        "input_schema": tool.input_schema,
    }


def model_gets_json(turn: Turn) -> dict[str, Any]:
    """What the model gets of a turn: text length, images, images left out, cuts."""
    return {
        "text_chars": len(turn.text),
        "images": [
            {
                "field": i.field,
                "shape": i.shape_text,
                "mime": i.mime,
                "bytes": len(i.encoded()),
            }
            for i in turn.images
        ],
        "omitted_images": [
            {"field": i.field, "shape": i.shape_text} for i in turn.omitted
        ],
        "cuts": [
            {"field": c.field, "shown_chars": c.shown, "total_chars": c.total}
            for c in turn.cuts
        ],
    }


def _manifest_json(manifest: Manifest) -> dict[str, Any]:
    reward_range = manifest.reward.range
    return {
        "path": manifest.path,
        "reward_range": list(reward_range) if reward_range else None,
        "resources": manifest.resources.model_dump(exclude_none=True),
        "network": manifest.network.mode,
        "allowed_hosts": list(manifest.network.allowed_hosts),
        "requires_credentials": manifest.execution.requires_credentials,
    }


@dataclass(frozen=True)
class Played:
    """A reset or step the check's episode made: its `frame`, and the turn the model
    gets of it (`shown`)."""

    frame: Frame
    shown: Turn

    @property
    def observation(self) -> dict[str, Any]:
        return self.frame.observation

    @property
    def reward(self) -> float | None:
        return self.frame.reward

    @property
    def done(self) -> bool:
        return self.frame.done

    @property
    def turn(self) -> str:
        """The turn's text."""
        return self.shown.text

    def to_json(self) -> dict[str, Any]:
        extra = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in ("frame", "shown")
        }
        return {
            "observation": sized_images(self.observation),
            "reward": self.reward,
            "done": self.done,
            "turn": self.turn,
            "model_gets": model_gets_json(self.shown),
            **extra,
        }


@dataclass(frozen=True)
class ResetPlayed(Played):
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class StepPlayed(Played):
    action: dict[str, Any]


@dataclass(frozen=True)
class SeedCheck:
    """The same reset (and action) on fresh sessions: `match` or `differs`; without a
    seed, whether seeds are `honoured`, `ignored` or `not honoured`; or `error`."""

    status: Literal["match", "differs", "honoured", "ignored", "not honoured", "error"]
    compared: tuple[str, ...]
    differences: tuple[str, ...] | None = _sparse()
    seeds: tuple[int, ...] | None = _sparse()
    error: str | None = _sparse()


@dataclass(frozen=True)
class Sessions:
    """The session probe: `refused` at `max_sessions`, `all accepted` (`at_least`),
    `reset failed` or `unknown` (with `error`) after `accepted`, or `not probed`."""

    status: Literal["refused", "all accepted", "reset failed", "unknown", "not probed"]
    accepted: int | None = _sparse()
    max_sessions: int | None = _sparse()
    active_at_refusal: int | None = _sparse()
    at_least: int | None = _sparse()
    error: str | None = _sparse()


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
    app: AppServed | None = None
    docker: DockerRun | None = None
    health: str | None = None
    metadata: dict[str, Any] | None = None
    """The env's own `/metadata`, as it sent it (less empty values)."""
    manifest: Manifest | None = None
    """None: no openenv.yaml, or no `validation:` block."""
    tasks: Tasks | None = None
    action: ActionInfo | None = None
    tools: tuple[Tool, ...] | None = None
    reset: ResetPlayed | None = None
    step: StepPlayed | None = None
    seed_check: SeedCheck | None = None
    sessions: Sessions | None = None
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
        error = render_settings(error, CHECK_FLAGS)
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
            self.docker = DockerRun.of(provider)
            return
        if not isinstance(provider, SupervisedUVProvider):
            return
        self.app = AppServed(
            provider.app_choice, tuple(provider.failed_apps), provider.gradio_hidden
        )
        self.warnings += [render_settings(note, CHECK_FLAGS) for note in provider.notes]

    def to_json(self) -> dict[str, Any]:
        """The report as JSON; image fields of the observations are replaced by
        their size (`{"image": "600x800x3", "pixels": 1440000}`), not their pixels."""
        data = {
            f.name: _json(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in ("stage", "launched")
        }
        return {"ok": self.ok, **data}


def _json(value: Any) -> Any:
    """`value` as JSON data: a summary by its own `to_json`, or as an object (less
    its unset sparse fields); a core type the report carries (`Tool`, `Manifest`)
    in its JSON form; a tuple of them as a list; the env's own data (dicts, lists)
    as it is."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Tool):
        return _tool_json(value)
    if isinstance(value, Manifest):
        return _manifest_json(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields_json(value)
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


def _fields_json(value: Any) -> dict[str, Any]:
    return {
        f.name: _json(getattr(value, f.name))
        for f in dataclasses.fields(value)
        if not (f.metadata.get("sparse") and getattr(value, f.name) is None)
    }


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
