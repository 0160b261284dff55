"""The settings both verifiers lines share, each declared once (name, type, default,
docstring): which env and where its servers run (`EnvSettings`), how a launched server
is set up, the limits of an episode and how it is shown and scored
(`EpisodeSettings`), which tasks the taskset has (`TaskSettings`); and what they
mean for an episode (`env_target`, `EpisodeSettings.limits`), which `check` builds
the same way.

    class OpenEnvUserConfig(EpisodeSettings, vf.UserConfig)   # 0.2: --taskset.task.user.*
    class OpenEnvConfig(TasksetSettings, EpisodeSettings, vf.TasksetConfig)  # 0.4

Plain pydantic mixins (no verifiers import); verifiers' CLI and `check`'s parser
(`cli.flags`) read the field docstrings as `--help`. A message names a setting by the
core's token (`core.setting_names`), spelled by the `Surface` of the config's line
(`EnvSettings.surface`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openenv_v1.core import EpisodeLimits
from openenv_v1.core.episode.render import ObservationFormat
from openenv_v1.core.episode.replies import REASONING_DELIMITERS
from openenv_v1.core.episode.report import (
    CAPACITY_WAIT_S,
    MAX_INVALID_ACTIONS,
    MAX_OBSERVATION_CHARS,
    RESET_TIMEOUT_S,
    RESUME_LOST_SESSIONS,
    REWARD,
    STEP_TIMEOUT_S,
    RewardMode,
    ToolCalls,
)
from openenv_v1.core.launch.env_target import (
    CONNECT_TIMEOUT_S,
    LAUNCH_TIMEOUT_S,
    EnvTarget,
)
from openenv_v1.core.launch.plan import ProviderName, settle_use_docker
from openenv_v1.core.manifest import Manifest, credentials_error
from openenv_v1.core.setting_names import Surface, render_settings, setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.leases import PoolLeases


class EnvSettings(BaseModel):
    """Which env the taskset runs, where its servers run and how the model acts: the
    taskset's own settings on both lines (`--taskset.*` on verifiers 0.2,
    `--env.taskset.*` on 0.4)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    env: str | None = None
    """OpenEnv environment id (e.g. `openenv/wordle`), launched with the UV provider
    (shared by rollouts, see `shared_servers`) or with Docker (`use_docker`).
    Required unless `base_url` is set."""
    base_url: str | list[str] | None = None
    """URL of a running OpenEnv server, or a list of several (`["http://a:8000",
    "http://b:8000"]`; on the command line the same list as JSON). Connect only:
    nothing is cloned, launched or stopped, and `env`, `use_docker` and provider
    settings are ignored. A list spreads the sessions over its servers by what each
    holds (learned from their `CAPACITY_REACHED` answers, or `sessions_per_server`);
    a server that cannot be reached is taken out, its episodes start again on
    another, and it takes sessions again once its `/health` answers."""
    provider: ProviderName | None = None
    """Where env servers run, with that place's options in the episode setting
    `provider_kwargs`: `uv` (OpenEnv's UV provider on this host), `docker` (the same
    as `use_docker`), `swarm` (a Docker Swarm service), or a cloud sandbox of
    OpenEnv's: `daytona`, `modal`, `aca` (Azure Container Apps), `hf_sandbox`,
    `novita` (their SDK must be installed; see docs/providers.md). Unset: UV, or
    Docker with `use_docker`. Servers of any provider are shared like UV ones
    (`shared_servers`). Not with `base_url`."""
    use_docker: bool = False
    """Launch the env in a Docker container instead of with UV: the image in
    `provider_kwargs.image`, else one built from `provider_kwargs.project_path`'s
    Dockerfile, else the Space's image. On verifiers 0.4 the containers run on this
    host, shared like UV servers (`shared_servers`); on 0.2 the user simulator runs
    on a Prime VM of its own with Docker there (`colocated` off, `vm` on) unless
    `docker_on_host`. Not with `base_url`."""
    shared_servers: bool = True
    """Launch `env` once per eval and let rollouts share it, each on its own session
    (more servers are launched while all are at their session limit). Applies to
    every provider (UV, Docker and the others; on verifiers 0.2 Docker only with
    `docker_on_host`, and only with the user simulator on this host); off, each
    rollout launches its own."""
    sessions_per_server: int | None = Field(None, ge=1)
    """Session limit of one shared server; unset, it is learned from the server's
    `CAPACITY_REACHED` answers."""
    max_servers: int | None = Field(None, ge=1)
    """Most shared servers launched at once; unset, while all are full the pool
    launches as many as the waiting rollouts need, as long as the host keeps 1 GiB (or
    twice the largest server's memory) free. An env without concurrent sessions gets
    a server per concurrent rollout, reused by later ones."""
    tool_calls: ToolCalls = "text"
    """How the model acts. `text`: each reply is an action written as JSON (or bare
    text), for any model. `native`: the env's MCP tools (for other envs, one `act`
    tool taking the action) become the model's own tools and each tool call is one
    step; for models trained to call tools. This package's harness (the default)
    passes them to the model; on verifiers 0.2 so does `--harness.id null`, and
    native needs the user simulator on this host (with `use_docker`, only with
    `docker_on_host`)."""

    surface: ClassVar[Surface | None] = None
    """How the line these settings are on spells a setting (its binding's `flags`);
    None: its messages keep the tokens (`check` renders them)."""

    @classmethod
    def spelled(cls, text: str) -> str:
        """`text` with the settings it names spelled as `surface` sets them."""
        return text if cls.surface is None else render_settings(text, cls.surface)

    @field_validator("base_url", mode="before")
    @classmethod
    def _base_url_list(cls, value: object) -> object:
        """A JSON list given as one string (verifiers' CLI passes a `str | list`
        field's flag as it is) is read as the list."""
        if isinstance(value, str) and value.lstrip().startswith("["):
            try:
                return json.loads(value)
            except ValueError:
                raise ValueError(
                    f"{cls.spelled(setting('base_url'))} {value!r} is not a JSON list of "
                    'URLs: give one URL, or a list such as ["http://a:8000", '
                    '"http://b:8000"]'
                ) from None
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url_urls(cls, value: str | list[str] | None) -> str | list[str] | None:
        if not isinstance(value, list):
            return value
        urls = [url.strip().rstrip("/") for url in value]
        if not urls or not all(urls):
            raise ValueError(
                f"{cls.spelled(setting('base_url'))} {value!r} has no URL in it, or an "
                'empty one: give one URL, or a list such as ["http://a:8000", '
                '"http://b:8000"]'
            )
        if len(set(urls)) < len(urls):
            raise ValueError(
                f"{cls.spelled(setting('base_url'))} {value!r} names a server twice: list "
                "each once"
            )
        # A list of one is that server, connected to as a single URL is.
        return urls[0] if len(urls) == 1 else urls

    def base_urls(self) -> tuple[str, ...]:
        """The servers of a `base_url` list; () for one URL or none."""
        return tuple(self.base_url) if isinstance(self.base_url, list) else ()

    @model_validator(mode="after")
    def _settle_use_docker(self) -> Self:
        try:
            self.use_docker = settle_use_docker(
                self.provider, use_docker=self.use_docker, base_url=self.base_url
            )
        except ValueError as e:
            raise ValueError(self.spelled(str(e))) from None
        return self

    def require_target(self, taskset_id: str | None) -> None:
        """Fail, naming the flags, when neither `env` nor `base_url` is set; called
        when the taskset is built, as verifiers builds the config from its id alone
        before it reads any flag."""
        if not self.env and not self.base_url:
            raise ValueError(
                self.spelled(
                    f"taskset {taskset_id or 'openenv-v1'!r} needs an environment: "
                    f"pass {setting('env')} <org/name> (launched with UV) or "
                    f"{setting('base_url')} <http://host:port> (a running server), "
                    "or set env or base_url in the taskset's table of the config file"
                )
            )

    def shares_servers(self) -> bool:
        """Whether rollouts lease shared servers launched once per eval."""
        return bool(self.shared_servers and self.env and not self.base_url)

    def leases_servers(self) -> bool:
        """Whether rollouts lease their sessions from a desk the taskset starts
        (`TasksetCore.start_pool`): shared servers, or a `base_url` list's."""
        return self.shares_servers() or bool(self.base_urls())


class EpisodeSettings(BaseModel):
    """How a launched env server is set up, the limits of an episode, and how its
    observations are shown and its reward counted."""

    model_config = ConfigDict(use_attribute_docstrings=True)

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
    launch_timeout_s: float = LAUNCH_TIMEOUT_S
    """Seconds a launched server may take to answer `/health` (UV provider's
    `context_timeout_s` unless provider_kwargs sets it); a UV server the launcher
    starts again (on another port, with gradio, with the next app candidate) gets
    them afresh."""
    connect_timeout_s: float = CONNECT_TIMEOUT_S
    """Seconds to open the WebSocket session, and a connection to read the server's
    action schema (a connection not made in time counts as a lost server)."""
    reset_timeout_s: float = RESET_TIMEOUT_S
    """Seconds `reset` may take."""
    step_timeout_s: float = STEP_TIMEOUT_S
    """Seconds one `step` may take; a slower step ends the rollout with an error."""
    max_invalid_actions: int = Field(MAX_INVALID_ACTIONS, ge=1)
    """Consecutive invalid actions (unparseable, against the schema, rejected by the
    server) that end the episode with stop condition `openenv_invalid_actions`."""
    capacity_wait_s: float = CAPACITY_WAIT_S
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
    max_observation_chars: int = Field(MAX_OBSERVATION_CHARS, ge=1_000)
    """Most characters of text in one user turn. Fields that would push a turn over
    it are cut, the longest first, each with a note of how much was cut (the action
    format of the opening turn is never cut)."""
    reward: RewardMode = REWARD
    """The episode's reward from its steps' rewards: `sum` (all of them added) or
    `last` (the last reward the env gave, as OpenEnv's harness and trajectory rubrics
    mean it). An episode in which the env gave no reward at all is unscored: None on
    verifiers 0.4, 0.0 with `info.openenv.reward` None and metric `openenv_unscored`
    1 on 0.2. The step rewards are kept in `info.openenv.step_rewards`."""
    episode_timeout_s: float | None = Field(None, gt=0)
    """Wall seconds an episode may run from its reset; past it no more steps are
    taken and the rollout fails, naming the budget. Unset: the env folder's
    openenv.yaml `validation.resources.episode_timeout_s`, else no budget."""
    resume_lost_sessions: bool = RESUME_LOST_SESSIONS
    """Resume an episode whose env session is lost after its first model turn (its
    server, container or node gone, the connection closed): a fresh session, on a
    live server, is reset with the same kwargs and sent the same actions, and the
    episode goes on only if every answer equals what it saw (reward, done and
    observation, less id fields); else it ends naming where the replay diverged. At
    most 3 resumes per episode, counted in metric `openenv_resumed`. Off: the loss
    ends the episode. A slow step on a live server is never resent."""
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
        enforces `step_timeout_s` when that is the longest (see `EnvEpisode.send`)."""
        return max(self.reset_timeout_s, self.step_timeout_s, self.connect_timeout_s)

    def with_manifest(self, manifest: Manifest | None) -> Self:
        """These settings with the defaults `manifest` (the env folder's openenv.yaml)
        declares: its episode budget where `episode_timeout_s` is unset, its reward
        range. Fails, naming them and `forward_env` by token, when it declares
        credentials `forward_env` does not pass."""
        if manifest is None:
            return self
        if error := credentials_error(manifest, self.forward_env):
            raise ValueError(error)
        update: dict[str, Any] = {"reward_range": manifest.reward.range}
        budget = manifest.resources.episode_timeout_s
        if self.episode_timeout_s is None and budget is not None:
            update["episode_timeout_s"] = budget
        return self.model_copy(update=update)

    def limits(self) -> EpisodeLimits:
        """The `EpisodeLimits` of these settings: each of its fields from the setting
        of the same name (`resume` from `resume_lost_sessions`)."""
        same = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(EpisodeLimits)
            if f.name in EpisodeSettings.model_fields
        }
        same["reasoning_delimiters"] = tuple(map(tuple, self.reasoning_delimiters))
        return EpisodeLimits(**same, resume=self.resume_lost_sessions)


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


class TasksetSettings(EnvSettings, TaskSettings):
    """The taskset's own settings on both lines."""


class EnvPlace(Protocol):
    """Where an episode's env comes from: `EnvSettings`, or a task's data."""

    env: str | None
    base_url: str | list[str] | None
    use_docker: bool
    provider: str | None


class UnsetVariables(ValueError):
    """`forward_env` names variables this process does not have (`names`)."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        super().__init__(
            f"forward_env names {', '.join(names)}, not set in the eval's "
            f"environment: export it, or drop it from {setting('forward_env')}"
        )


def forwarded_values(names: Sequence[str]) -> dict[str, str]:
    """The values of the variables `names` (`forward_env`) in this process. Raises
    `UnsetVariables`, naming them, for any that is unset."""
    if missing := [name for name in names if name not in os.environ]:
        raise UnsetVariables(missing)
    return {name: os.environ[name] for name in names}


def env_target(
    place: EnvPlace,
    episode: EpisodeSettings,
    *,
    secret_env: dict[str, str],
    pool: PoolLeases | None = None,
    pool_url: str | None = None,
) -> EnvTarget:
    """The `EnvTarget` of an episode: `place`'s `base_url` (a list is leased from
    `pool` or `pool_url`), else a lease from the shared servers (`pool`,
    `pool_url`), else a launch of `place.env` of its own; with `episode`'s launch
    options and timeouts, and `secret_env` for a launched server."""
    connect = bool(place.base_url)
    urls = place.base_url if isinstance(place.base_url, list) else []
    return EnvTarget(
        env=None if connect else place.env,
        base_url=None if urls else place.base_url,
        base_urls=tuple(urls),
        use_docker=bool(place.use_docker and not connect),
        provider=None if connect else place.provider,
        provider_kwargs=episode.provider_kwargs,
        secret_env={} if connect else secret_env,
        pool=None if connect and not urls else pool,
        pool_url=None if connect and not urls else pool_url,
        launch_timeout_s=episode.launch_timeout_s,
        connect_timeout_s=episode.connect_timeout_s,
        message_timeout_s=episode.message_timeout_s(),
        web_ui=episode.server_web_ui,
        cache_max_gb=episode.cache_max_gb,
    )


__all__ = [
    "EnvSettings",
    "EpisodeSettings",
    "TaskSettings",
    "TasksetSettings",
    "UnsetVariables",
    "env_target",
    "forwarded_values",
]
