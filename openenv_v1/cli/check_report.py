"""What `openenv-v1 check` was asked to do and what it found: `CheckOptions`, each
stage's typed summary (frozen values, one class per finding), `CheckReport` holding
them, and its JSON form (images shown by their size).

A summary field marked `_SPARSE` is left out of the JSON while it is None: it belongs
to some outcomes of its stage only (a seed check's `error`, a refusal's
`max_sessions`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

from openenv_v1.cli.flags import CHECK_FLAGS
from openenv_v1.cli.hints import hint_for
from openenv_v1.core.episode.images import find_images
from openenv_v1.core.episode.turns import Turn
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.manifest import Manifest
from openenv_v1.core.setting_names import render_settings

__all__ = ["CheckOptions", "CheckReport", "describe_target"]

_SPARSE = {"sparse": True}


def _sparse() -> Any:
    return field(default=None, metadata=_SPARSE)


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
    """As the `observation_images` setting: send image fields as images."""
    max_observation_chars: int = 8_000
    """As the `max_observation_chars` setting: the bound on a turn's text."""


@dataclass(frozen=True)
class FailedApp:
    app: str
    source: str
    error: str


@dataclass(frozen=True)
class AppChoice:
    """A UV launch's app: the one served, why it was chosen, candidates that failed."""

    app: str | None
    source: str | None
    failed: tuple[FailedApp, ...]
    gradio_hidden: bool


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
class ManifestFindings:
    """What the env folder's openenv.yaml declares."""

    path: str
    reward_range: tuple[float, float] | None
    resources: dict[str, Any]
    network: str
    allowed_hosts: tuple[str, ...]
    requires_credentials: list[str] | bool

    @classmethod
    def of(cls, manifest: Manifest) -> ManifestFindings:
        return cls(
            path=manifest.path,
            reward_range=tuple(manifest.reward.range)
            if manifest.reward.range
            else None,
            resources=manifest.resources.model_dump(exclude_none=True),
            network=manifest.network.mode,
            allowed_hosts=tuple(manifest.network.allowed_hosts),
            requires_credentials=manifest.execution.requires_credentials,
        )


@dataclass(frozen=True)
class Split:
    name: str
    type: str | None
    num_tasks: int | None


@dataclass(frozen=True)
class Tasks:
    """The Task API: `offered`, its `splits` with their `num_tasks`, and what a
    taskset without `resets` runs (`taskset_uses`)."""

    offered: bool
    splits: tuple[Split, ...]
    taskset_uses: Literal["env tasks", "default reset"]
    env_name: str | None = _sparse()
    split: str | None = _sparse()


@dataclass(frozen=True)
class FieldInfo:
    """One property of an action schema or a tool's input schema."""

    name: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class ActionInfo:
    title: str | None
    mcp: bool
    fields: tuple[FieldInfo, ...]
    raw_field: str | None
    schema: dict[str, Any]
    mcp_route: Literal["session_rpc", "step"] | None = _sparse()


@dataclass(frozen=True)
class ToolInfo:
    name: str
    description: str
    arguments: tuple[FieldInfo, ...]
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ImageSent:
    field: str
    shape: str
    mime: str
    bytes: int


@dataclass(frozen=True)
class ImageLeft:
    field: str
    shape: str


@dataclass(frozen=True)
class FieldCut:
    field: str
    shown_chars: int
    total_chars: int


@dataclass(frozen=True)
class ModelGets:
    """What the model gets of a turn: text length, images, images left out, cuts."""

    text_chars: int
    images: tuple[ImageSent, ...]
    omitted_images: tuple[ImageLeft, ...]
    cuts: tuple[FieldCut, ...]

    @classmethod
    def of(cls, turn: Turn) -> ModelGets:
        return cls(
            text_chars=len(turn.text),
            images=tuple(
                ImageSent(i.field, i.shape_text, i.mime, len(i.encoded()))
                for i in turn.images
            ),
            omitted_images=tuple(
                ImageLeft(i.field, i.shape_text) for i in turn.omitted
            ),
            cuts=tuple(FieldCut(c.field, c.shown, c.total) for c in turn.cuts),
        )


@dataclass(frozen=True)
class Outcome:
    """A reset's or step's result, as the seed check compares it."""

    observation: dict[str, Any] | None
    reward: float | None
    done: bool

    @classmethod
    def of(cls, result: Any) -> Outcome:
        return cls(result.observation, result.reward, bool(result.done))


@dataclass(frozen=True)
class Played(Outcome):
    """A reset or step the check made, and the turn the model gets of it."""

    turn: str
    model_gets: ModelGets


def played(result: Any, turn: Turn) -> tuple[Any, ...]:
    """The fields of a `Played` for `result` and the `turn` the model gets of it."""
    outcome = Outcome.of(result)
    return (
        outcome.observation,
        outcome.reward,
        outcome.done,
        turn.text,
        ModelGets.of(turn),
    )


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
    app: AppChoice | None = None
    docker: DockerRun | None = None
    health: str | None = None
    metadata: dict[str, Any] | None = None
    """The env's own `/metadata`, as it sent it (less empty values)."""
    manifest: ManifestFindings | None = None
    """None: no openenv.yaml, or no `validation:` block."""
    tasks: Tasks | None = None
    action: ActionInfo | None = None
    tools: tuple[ToolInfo, ...] | None = None
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
        choice = provider.app_choice
        self.app = AppChoice(
            app=choice.app if choice else None,
            source=choice.source if choice else None,
            failed=tuple(
                FailedApp(c.app, c.source, why) for c, why in provider.failed_apps
            ),
            gradio_hidden=provider.gradio_hidden,
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
        for stage in ("reset", "step"):
            if isinstance(data.get(stage), dict):
                data[stage]["observation"] = sized_images(data[stage]["observation"])
        return {"ok": self.ok, **data}


def _json(value: Any) -> Any:
    """`value` as JSON data: a summary as an object (less its unset sparse fields),
    a tuple of them as a list; the env's own data (dicts, lists) as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (f.metadata.get("sparse") and getattr(value, f.name) is None)
        }
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


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
