"""OpenEnv's local Docker provider, extended to run env servers safely and own them.

`LocalDockerProvider.start_container` runs `docker run -d -p PORT:8000 IMAGE`: published
on every interface, with no limits, no labels, and a container nobody removes when its
eval dies. `DockerLaunch` keeps the provider's shape (start a container, wait for
`/health`, stop it) and:

- runs the image it picks: `image`, one built from the env folder's Dockerfile
  (`docker_image`; after a new build the env's older images go, `docker_prune`), or
  the Space's;
- publishes on `host` only (default 127.0.0.1), on a port Docker picks unless `port`
  is set;
- applies limits for model-written code: `--security-opt no-new-privileges`, a pids
  limit, a memory limit (swap included), optional `cpus` and a read-only root, plus
  any extra `docker run` options;
- labels the container with its owner process and run, and starts the owner's reaper
  (`docker_reaper`), so the container goes when the owner does, however it ends;
- passes `env_vars` by name only (`-e NAME`, the value in the client's environment), so
  values never show in a command line or an error;
- notices a container that exits before it is ready and reports its exit code (and an
  out-of-memory kill) with the tail of its logs.

It has the provider face `ServerPool` drives (`start() -> url`, `wait_for_ready()`,
`running()`, `stop()`), so shared containers are pooled like UV servers:

    provider, start_args = docker_launch_plan(EnvTarget(env="org/maze", use_docker=True,
        provider_kwargs={"project_path": "envs/maze_env"}))
    url = provider.start(**start_args); provider.wait_for_ready(); ...; provider.stop()
"""

from __future__ import annotations

import contextlib
import logging
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv_v1.core.docker_image import EnvImage, docker_cli, image_for, run_docker
from openenv_v1.core.docker_prune import prune_env_images
from openenv_v1.core.docker_reaper import owner_labels
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.light_import import without_gradio

with without_gradio():
    from openenv.core.containers.runtime.providers import LocalDockerProvider

if TYPE_CHECKING:
    from openenv_v1.core.launch import EnvTarget

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40
UV_ONLY_OPTIONS = {"app", "workers", "reload", "context_timeout_s", "web_ui"}
"""Options of a UV launch that mean nothing to an image with its own command."""
OptionsT = TypeVar("OptionsT", bound=BaseModel)


class DockerOptions(BaseModel):
    """The Docker keys of `task.user.provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    """Image to run (local or from a registry); unset, one is built from
    `project_path`'s Dockerfile, or the Space's image is run."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose `server/Dockerfile` (else `Dockerfile`) is built, as
    `openenv build` builds it, and reused while its files are unchanged."""
    keep_images: int = Field(3, ge=1)
    """Images of this env folder kept after a new one is built (older ones built by
    openenv-v1 are removed, never one a running container uses)."""
    port: int | None = None
    """Host port to publish on; unset, Docker picks a free one."""
    host: str = "127.0.0.1"
    """Host address the container's port is published on (loopback unless set)."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    memory: str | None = "4g"
    """Memory limit (`docker run --memory`, swap included); None for none."""
    pids_limit: int | None = Field(1024, ge=16)
    """Most processes and threads in the container (stops fork bombs); None for none."""
    cpus: float | None = Field(None, gt=0)
    """CPU limit (`docker run --cpus`); unset, none."""
    read_only: bool = False
    """Read-only root filesystem, with a writable tmpfs at /tmp."""
    no_new_privileges: bool = True
    """`--security-opt no-new-privileges`: no setuid escalation inside."""
    docker_run_args: list[str] = Field(default_factory=list)
    """Extra `docker run` options, placed before the image (e.g. `["--network",
    "none"]`)."""


class DockerLaunch(LocalDockerProvider):
    """A `LocalDockerProvider` that runs one env container safely and owns it; see
    the module docstring. Thread-safe; `stop()` is idempotent and no start follows it.

    OpenEnv's constructor only checks `docker version` through `docker` on PATH; this
    one checks nothing up front (a missing client or daemon fails `start()` with
    Docker's own message) and runs `docker_cli()`.
    """

    def __init__(
        self,
        *,
        env: str,
        options: DockerOptions,
        launch_timeout_s: float = 120.0,
        secret_env: Mapping[str, str] | None = None,
    ) -> None:
        self._container_id: str | None = None
        self._container_name: str | None = None
        self.env = env
        self.options = options
        self.launch_timeout_s = launch_timeout_s
        self._secret_env = dict(secret_env or {})
        self.image: EnvImage | None = None
        """The image run, and whether it was built or reused."""
        self.start_seconds: float | None = None
        """Seconds from `docker run` to a ready server."""
        self.published: str | None = None
        """The host address and port Docker published the server's port on, as
        `docker port` reports it (e.g. `127.0.0.1:49153`)."""
        self.app_choice = None  # the image runs its own command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = _call
        self._base_url: str | None = None
        self._image_name: str | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._checked_at = 0.0
        self._was_running = False
        self._refreshing = False
        self._run_started = 0.0

    @property
    def container(self) -> str | None:
        """The container's name while it exists."""
        return self._container_name

    @property
    def container_id(self) -> str | None:
        """The container's id once `docker run` returned, while it exists."""
        return self._container_id

    def start(
        self,
        port: int | None = None,
        env_vars: Mapping[str, str] | None = None,
        **_: object,
    ) -> str:
        """Find or build the image and start its container; returns the base URL."""
        self.image = self._image()
        return self.start_container(self.image.image, port=port, env_vars=env_vars)

    def _image(self) -> EnvImage:
        options = self.options
        chosen = image_for(self.env, options.image, options.project_path, options.tag)
        if chosen.reused is False:  # just built: the env's older images may go
            prune_env_images(chosen.image.rpartition(":")[0], options.keep_images)
        return chosen

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        options = self.options
        env = {**options.env_vars, **(env_vars or {}), **self._secret_env}
        # OpenEnv's names are `<image>-<ms>`: shared containers may start within one ms.
        name = f"{self._generate_container_name(image)}-{secrets.token_hex(3)}"
        argv = [docker_cli(), "run", "-d", "--init", "--name", name]
        published = (
            f"{options.host}:{port or options.port or ''}:{options.container_port}"
        )
        argv += ["-p", published]
        for key, value in owner_labels(docker_cli(), self.env).items():
            argv += ["--label", f"{key}={value}"]
        argv += self._limits()
        for key in env:
            argv += ["-e", key]  # the value comes from the client's environment
        argv += [*options.docker_run_args, image]
        with self._lock:
            if self._stopped:
                raise EnvFailure("the Docker launch was stopped")
            self._container_name, self._image_name = name, image
        self._run_started = time.monotonic()
        result = run_docker(*argv[1:], timeout=self.launch_timeout_s, env=env)
        if result.returncode != 0:
            raise EnvFailure(
                f"`docker run ... {image}` failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        with self._lock:
            self._container_id = result.stdout.strip()
            stopped = self._stopped
        if stopped:  # stop() ran while `docker run` was under way
            run_docker("rm", "-f", result.stdout.strip(), timeout=60)
            raise EnvFailure("the Docker launch was stopped")
        host_port = self._published_port()
        client_host = "127.0.0.1" if options.host in {"0.0.0.0", "::"} else options.host
        self._base_url = f"http://{client_host}:{host_port}"
        logger.info(
            "%s: container %s of %s at %s", self.env, name, image, self._base_url
        )
        return self._base_url

    def _limits(self) -> list[str]:
        options = self.options
        argv: list[str] = []
        if options.no_new_privileges:
            argv += ["--security-opt", "no-new-privileges"]
        if options.pids_limit is not None:
            argv += ["--pids-limit", str(options.pids_limit)]
        if options.memory:
            argv += ["--memory", options.memory, "--memory-swap", options.memory]
        if options.cpus is not None:
            argv += ["--cpus", str(options.cpus)]
        if options.read_only:
            argv += ["--read-only", "--tmpfs", "/tmp"]
        return argv

    def _published_port(self) -> str:
        result = run_docker(
            "port", self._container_id or "", f"{self.options.container_port}/tcp"
        )
        for line in result.stdout.splitlines():
            address, _, port = line.strip().rpartition(":")
            if port.isdigit():
                self.published = f"{address}:{port}"
                return port
        state = self._state()
        if state is not None and not state.get("Running"):
            raise EnvFailure(self._exit_message(state))  # gone before it was asked
        raise EnvFailure(
            f"container {self._container_name} publishes no port for "
            f"{self.options.container_port}/tcp: {result.stderr.strip()}"
        )

    def wait_for_ready(
        self, base_url: str | None = None, timeout_s: float | None = None
    ) -> None:
        """Poll `/health` until 200; a container that exits first fails at once with
        its exit code and log tail."""
        url = base_url or self._base_url
        timeout_s = self.launch_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        next_check = time.monotonic() + 1.0
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:
                if self._container_id is None or url is None:
                    raise EnvFailure(
                        "the Docker launch was not started, or was stopped"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{url}/health").status_code == 200:
                        self.start_seconds = time.monotonic() - self._run_started
                        self._was_running, self._checked_at = True, time.monotonic()
                        return
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 1.0
                    state = self._state()
                    if state is not None and not state.get("Running"):
                        raise EnvFailure(self._exit_message(state))
                if time.monotonic() >= deadline:
                    raise EnvFailure(
                        f"container {self._container_name} ({self._image_name}) "
                        f"was not ready at {url}/health within {timeout_s:.0f}s (raise "
                        "task.user.launch_timeout_s if it is just slow); its log ends "
                        f"with:\n{self.log_tail()}"
                    )
                time.sleep(0.1)

    def _state(self) -> dict[str, Any] | None:
        import json

        result = run_docker(
            "inspect", "--format", "{{json .State}}", self._container_id or ""
        )
        if result.returncode != 0:
            return None
        with contextlib.suppress(ValueError):
            return json.loads(result.stdout)
        return None

    def _exit_message(self, state: Mapping[str, Any]) -> str:
        why = ""
        if state.get("OOMKilled"):
            why = (
                " (killed for exceeding its memory limit: raise provider_kwargs.memory)"
            )
        return (
            f"container {self._container_name} ({self._image_name}) exited "
            f"with code {state.get('ExitCode')}{why} before it was ready; its log ends "
            f"with:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self._container_id is None:
            return ""
        result = run_docker("logs", "--tail", str(lines), self._container_id)
        return (result.stdout + result.stderr).strip()

    def running(self) -> bool:
        """Whether the container runs, as Docker last said. Never blocks: `ServerPool`
        asks under its lock on every lease, so a stale answer (over a second old) is
        refreshed in the background and the last one returned."""
        if self._container_id is None:
            return False
        with self._lock:
            stale = time.monotonic() - self._checked_at >= 1.0
            if stale and not self._refreshing:
                self._refreshing = True
                threading.Thread(
                    target=self._refresh, name="openenv-v1-docker-state", daemon=True
                ).start()
        return self._was_running

    def _refresh(self) -> None:
        try:
            state = self._state()
            self._was_running = bool(state and state.get("Running"))
        finally:
            with self._lock:
                self._checked_at = time.monotonic()
                self._refreshing = False

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop the container (SIGTERM, SIGKILL after `grace_s`) and remove it."""
        with self._lock:
            self._stopped = True
            started = self._container_id is not None
            target = self._container_id or self._container_name
            self._container_id = self._container_name = self._base_url = None
        if target is None:
            return
        # A `docker run` that failed may have left the container created, unstarted.
        if started and grace_s > 0:
            run_docker(
                "stop", "-t", str(math.ceil(grace_s)), target, timeout=grace_s + 30
            )
        run_docker("rm", "-f", target, timeout=60)

    def stop_container(self) -> None:
        self.stop()


def docker_options(target: EnvTarget) -> DockerOptions:
    """`provider_kwargs` read as `DockerOptions` (see `read_image_options`)."""
    return read_image_options(
        DockerOptions, target, "Docker", "task.user.provider_kwargs"
    )


def read_image_options(
    model: type[OptionsT], target: EnvTarget, launcher: str, where: str
) -> OptionsT:
    """`target.provider_kwargs` read as the options `model` of a launcher that runs
    an image (Docker, Swarm): options of a UV launch are dropped with a warning,
    anything else unknown or invalid is an `EnvFailure` naming it and the known ones."""
    from openenv_v1.core.manifest import manifest_defaults

    # The env folder's openenv.yaml declares default limits; options set win.
    kwargs = {
        **manifest_defaults(model.model_fields, target.provider_kwargs),
        **target.provider_kwargs,
    }
    ignored = sorted(UV_ONLY_OPTIONS & kwargs.keys())
    if ignored:
        logger.warning(
            "%s launches ignore provider_kwargs %s (the image runs its own command)",
            launcher,
            ", ".join(ignored),
        )
    for key in ignored:
        kwargs.pop(key)
    try:
        return model(**kwargs)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'provider_kwargs'}: {err['msg']}"
            for err in e.errors()
        )
        raise EnvFailure(
            f"bad {launcher} option in {where}: {problems} (known: "
            f"{', '.join(model.model_fields)})"
        ) from None


def docker_launch_plan(target: EnvTarget) -> tuple[DockerLaunch, dict[str, Any]]:
    """The `DockerLaunch` for `target` and the keyword arguments of its `start()`."""
    assert target.env is not None
    provider = DockerLaunch(
        env=target.env,
        options=docker_options(target),
        launch_timeout_s=target.launch_timeout_s,
        secret_env=target.secret_env,
    )
    return provider, {}


def _call(fn: Callable[[], Any]) -> Any:
    return fn()
