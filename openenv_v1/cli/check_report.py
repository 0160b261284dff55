"""What `openenv-v1 check` was asked to do and what it found: `CheckOptions`,
`CheckReport` (with the launch's own account: a UV launch's app, a Docker launch's
image and container) and its JSON form, images shown by their size.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from openenv_v1.cli.hints import hint_for
from openenv_v1.core.episode.images import find_images
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.setting_names import render_settings


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
        error = render_settings(error, "check")
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
        self.warnings += [render_settings(note, "check") for note in provider.notes]

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
