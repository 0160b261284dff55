"""The episode settings both verifiers lines share: how a launched env server is set
up, the limits of an episode, and how observations are shown.

    class OpenEnvUserConfig(EpisodeSettings, vf.UserConfig)   # 0.2: --taskset.task.user.*
    class OpenEnvConfig(EpisodeSettings, vf.TasksetConfig)    # 0.4: --env.taskset.*

A mixin of plain pydantic fields (no verifiers import), so each line's config keeps
one definition, and one `--help` text, of every setting; verifiers' CLI reads the
field docstrings through the class's bases.
"""

from __future__ import annotations

import os
from typing import Any, Self

from pydantic import BaseModel, Field, model_validator

from openenv_v1.core import EpisodeLimits
from openenv_v1.core.render import ObservationFormat
from openenv_v1.core.replies import REASONING_DELIMITERS


class EpisodeSettings(BaseModel):
    provider_kwargs: dict[str, Any] = {}
    """OpenEnv's launch options (as for `GenericEnvClient.from_env`): `app` (unset:
    chosen from the env project's files), `project_path` (a local checkout or a `git+`
    URL), `env_vars` (non-secret values), `port`, `workers`, `host` (default
    127.0.0.1), `reload`, `context_timeout_s`, or for Docker `tag` and the like. Unused
    with `base_url`."""
    forward_env: list[str] = []
    """Names of variables of the eval's environment to pass into the launched env
    server (API keys, tokens). Only the names are configured or saved; the values are
    read from the eval process when the server is launched."""
    server_web_ui: bool = False
    """Let UV-launched env servers import gradio for OpenEnv's web UI (also implied by
    `ENABLE_WEB_INTERFACE` in `env_vars`). Off, gradio is hidden from env projects
    that do not list it in their dependencies, which halves their start-up (an env
    that imports it anyway is relaunched with it); turn it on to skip that first try
    for an env that imports gradio without declaring it."""
    launch_timeout_s: float = 120.0
    """Seconds a launched server may take to answer `/health` (UV provider's
    `context_timeout_s` unless provider_kwargs sets it)."""
    connect_timeout_s: float = 10.0
    """Seconds to open the WebSocket session."""
    reset_timeout_s: float = 60.0
    """Seconds `reset` may take."""
    step_timeout_s: float = 60.0
    """Seconds one `step` may take; a slower step ends the rollout with an error."""
    max_invalid_actions: int = Field(3, ge=1)
    """Consecutive invalid actions (unparseable, against the schema, rejected by the
    server) that end the episode with stop condition `openenv_invalid_actions`."""
    capacity_wait_s: float = 30.0
    """Seconds a rollout waits for a session while every shared server is full and
    none of their sessions ends (then it fails, naming the limit); also how long a
    reset refused at capacity is retried, with backoff."""
    observation_format: ObservationFormat = "text"
    """How observations are shown to the model: `text` (one line per field, the text
    field as is, history lists only with their new entries) or `json` (compact
    JSON of the whole observation)."""
    observation_images: bool = True
    """Send pixel fields of observations (an RGB frame as a flat list plus a shape
    field, a nested H x W x C list, a base64 PNG/JPEG or data URL) to the model as
    PNG images beside a one-line note. Turn off for a model without vision: the field
    then becomes a one-line note (`screen: image 210x160x3, not shown`)."""
    max_observation_chars: int = Field(8_000, ge=1_000)
    """Most characters of text in one user turn. Fields that would push a turn over
    it are cut, the longest first, each with a note of how much was cut (the action
    format of the opening turn is never cut)."""

    reasoning_delimiters: list[tuple[str, str]] = list(REASONING_DELIMITERS)
    """Opening and closing tags of the reasoning blocks a model writes in its reply
    text (`<think>`/`</think>` and the tags of other current open models). Everything
    up to the last closing tag is never read as the action; a reply left inside an
    opened block is an invalid action with feedback saying so. Set it to add a
    model's own tags (keep the defaults in the list) or to `[]` for none."""

    @model_validator(mode="after")
    def _tags_not_empty(self) -> Self:
        for pair in self.reasoning_delimiters:
            if not all(tag.strip() for tag in pair):
                raise ValueError(
                    f"reasoning_delimiters: {list(pair)} has an empty tag; give each "
                    "pair as [opening, closing], e.g. ['<think>', '</think>']"
                )
        return self

    @model_validator(mode="after")
    def _absolute_project_path(self) -> Self:
        # A launch may run in another working directory (0.2's user simulator), so
        # a relative path is resolved here, where the user wrote it.
        path = self.provider_kwargs.get("project_path")
        if isinstance(path, str) and path and not path.startswith("git+"):
            self.provider_kwargs["project_path"] = os.path.abspath(
                os.path.expanduser(path)
            )
        return self

    def message_timeout_s(self) -> float:
        """OpenEnv's own per-message limit: the longest call we allow. It also
        enforces `step_timeout_s` when that is the longest (see `EnvEpisode._step`)."""
        return max(self.reset_timeout_s, self.step_timeout_s, self.connect_timeout_s)

    def limits(self) -> EpisodeLimits:
        return EpisodeLimits(
            reset_timeout_s=self.reset_timeout_s,
            step_timeout_s=self.step_timeout_s,
            max_invalid_actions=self.max_invalid_actions,
            capacity_wait_s=self.capacity_wait_s,
            reasoning_delimiters=tuple(tuple(p) for p in self.reasoning_delimiters),
        )


__all__ = ["EpisodeSettings"]
