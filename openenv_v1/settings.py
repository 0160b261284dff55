"""The settings both verifiers lines share: how a launched env server is set up, the
limits of an episode, how observations are shown and rewards counted
(`EpisodeSettings`), and which tasks the taskset has (`TaskSettings`).

    class OpenEnvUserConfig(EpisodeSettings, vf.UserConfig)   # 0.2: --taskset.task.user.*
    class OpenEnvConfig(EpisodeSettings, vf.TasksetConfig)    # 0.4: --env.taskset.*
    class OpenEnvConfig(TaskSettings, vf.TasksetConfig)       # both: tasks

A mixin of plain pydantic fields (no verifiers import), so each line's config keeps
one definition, and one `--help` text, of every setting; verifiers' CLI reads the
field docstrings through the class's bases.
"""

from __future__ import annotations

import os
from typing import Any, Self

from pydantic import BaseModel, Field, model_validator

from openenv_v1.core import EpisodeLimits
from openenv_v1.core.episode.render import ObservationFormat
from openenv_v1.core.episode.replies import REASONING_DELIMITERS
from openenv_v1.core.episode.report import RewardMode
from openenv_v1.core.manifest import Manifest, credentials_error


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
    server_home: str | None = None
    """HOME of UV-launched env servers. Unset: a folder of their own, new for each
    eval and removed when it ends, so an env that writes `~/.gitconfig` or `~/.cache`
    writes there, not into yours (uv's cache and Pythons stay yours). A path: that
    folder (`~` for your own HOME). See docs/security.md for all a server sees."""
    server_web_ui: bool = False
    """Let UV-launched env servers import gradio for OpenEnv's web UI (also implied by
    `ENABLE_WEB_INTERFACE` in `env_vars`). Off, gradio is hidden from env projects
    that do not list it in their dependencies, which halves their start-up (an env
    that imports it anyway is relaunched with it); turn it on to skip that first try
    for an env that imports gradio without declaring it."""
    cache_max_gb: float | None = Field(None, gt=0)
    """Gigabytes the prepared environments of UV-launched env servers (under
    `$OPENENV_V1_CACHE_DIR`, default ~/.cache/openenv-v1) may take together: past it a
    launch removes the least recently used ones no running eval uses (as it removes
    those whose project folder is gone). Unset: `$OPENENV_V1_CACHE_MAX_GB`, else 10.
    `openenv-v1 cache` lists and prunes them."""
    launch_timeout_s: float = 120.0
    """Seconds a launched server may take to answer `/health` (UV provider's
    `context_timeout_s` unless provider_kwargs sets it); a UV server the launcher
    starts again (on another port, with gradio, with the next app candidate) gets
    them afresh."""
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
    reward: RewardMode = "sum"
    """The episode's reward from its steps' rewards: `sum` (all of them added) or
    `last` (the last reward the env gave, as OpenEnv's harness and trajectory rubrics
    mean it). An episode in which the env gave no reward at all is unscored: None on
    verifiers 0.4, 0.0 with `info.openenv.reward` None and metric `openenv_unscored`
    1 on 0.2. The step rewards are kept in `info.openenv.step_rewards`."""
    episode_timeout_s: float | None = Field(None, gt=0)
    """Wall seconds an episode may run from its reset; past it no more steps are
    taken and the rollout fails, naming the budget. Unset: the env folder's
    openenv.yaml `validation.resources.episode_timeout_s`, else no budget."""
    reward_range: tuple[float, float] | None = None
    """Set by the taskset from openenv.yaml's `validation.reward.range`, not by hand:
    step rewards outside it are counted (`openenv_rewards_outside_range`)."""

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

    def with_manifest(self, manifest: Manifest | None, forward_flag: str) -> Self:
        """These settings with the defaults `manifest` (the env folder's openenv.yaml)
        declares: its episode budget where `episode_timeout_s` is unset, its reward
        range. Fails, naming them, when it declares credentials `forward_env` does
        not pass (`forward_flag`: how the user sets it)."""
        if manifest is None:
            return self
        if error := credentials_error(manifest, self.forward_env, forward_flag):
            raise ValueError(error)
        update: dict[str, Any] = {"reward_range": manifest.reward.range}
        budget = manifest.resources.episode_timeout_s
        if self.episode_timeout_s is None and budget is not None:
            update["episode_timeout_s"] = budget
        return self.model_copy(update=update)

    def limits(self) -> EpisodeLimits:
        return EpisodeLimits(
            reset_timeout_s=self.reset_timeout_s,
            step_timeout_s=self.step_timeout_s,
            max_invalid_actions=self.max_invalid_actions,
            capacity_wait_s=self.capacity_wait_s,
            episode_timeout_s=self.episode_timeout_s,
            reward=self.reward,
            reward_range=self.reward_range,
            reasoning_delimiters=tuple(tuple(p) for p in self.reasoning_delimiters),
        )


class TaskSettings(BaseModel):
    """Where the taskset's tasks come from: `resets`, or the env's own tasks (OpenEnv's
    Task API), and how rollouts of one task start."""

    resets: list[dict[str, Any]] | None = None
    """One task per entry, each passed to OpenEnv's `reset(**kwargs)`. Unset: the
    env's own tasks when its server offers OpenEnv's Task API (see `split`), else one
    empty reset. Set together with the env's tasks (`split` given), each entry's
    kwargs are added to every env task's reset (one task per pair)."""
    split: str | None = None
    """The env's task split to run (OpenEnv Task API): unset, its test split (else
    validation, else the first); for training set `train`. Setting it requires the
    Task API."""
    num_tasks: int | None = Field(None, ge=1)
    """Most env tasks to take from the split (from `task_offset`); only those are
    read from the server. Unset: all."""
    task_offset: int = Field(0, ge=0)
    """Index of the split's first task to take: with `num_tasks`, a shard of the
    split (`task_offset = k * num_tasks`)."""
    shared_seed: bool = True
    """Give every rollout of a task the same `seed` when its reset kwargs carry none
    (derived from the task's key), so the rollouts of a group start from the same
    state and a GRPO baseline compares like with like. Off: the env picks its own."""

    @model_validator(mode="after")
    def _some_resets(self) -> Self:
        if self.resets is not None and not self.resets:
            raise ValueError(
                "resets is empty: give at least one reset, e.g. [{}], or leave it "
                "unset for the env's own tasks"
            )
        return self


__all__ = ["EpisodeSettings", "TaskSettings"]
