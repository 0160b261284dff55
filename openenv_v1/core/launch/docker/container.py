"""An env server in a Docker container on this host, run safely and owned.

OpenEnv's `LocalDockerProvider` runs `docker run -d -p PORT:8000 IMAGE`: published on
every interface, as root with Docker's default capabilities, on the default bridge
(the internet, the cloud metadata address, every other container), unlimited, and
never removed when its eval dies. `DockerLaunch` keeps that provider's shape (start,
wait for `/health`, stop), takes nothing else of it, and runs the image `image.py`
picks hardened (`options.limit_args`, `options.run_as`), with no egress and no
neighbours (`network`), labelled for its owner's reaper (`reaper`), its variables
passed by name only (`run_args`); a container that exits before it is ready fails
with its exit code and log tail (`container_state`), or, when `user` "auto" ran it
as uid 65534, is run again as root with a warning.

    launch = docker_launch_plan(EnvTarget(env="org/maze", use_docker=True,
        provider_kwargs={"project_path": "envs/maze_env"})).launcher
    launch.start(); url = launch.wait_for_ready(); ...; launch.stop()
"""

from __future__ import annotations

import logging
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import LastSaid, docker_port, run_docker
from openenv_v1.core.launch.docker.container_state import (
    container_log_tail,
    container_state,
    exit_message,
    remove_container,
)
from openenv_v1.core.launch.docker.image import EnvImage, image_for
from openenv_v1.core.launch.docker.network import address_on, ensure_network, forget
from openenv_v1.core.launch.docker.options import (
    DockerOptions,
    docker_options,
    root_hint,
)
from openenv_v1.core.launch.docker.prune import prune_env_images
from openenv_v1.core.launch.docker.run_args import ContainerRun, container_run
from openenv_v1.core.launch.env_target import LAUNCH_TIMEOUT_S
from openenv_v1.core.launch.plan import LaunchPlan, run_here
from openenv_v1.core.launch.readiness import client_host, wait_ready
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

__all__ = ["DockerLaunch", "docker_launch_plan"]

logger = logging.getLogger(__name__)

_needs_root: set[str] = set()
"""Images seen, in this process, to exit before ready as `NOBODY` and run as root."""


class DockerLaunch:
    """One env container. Thread-safe; `stop()` is idempotent and final."""

    def __init__(
        self,
        *,
        env: str,
        options: DockerOptions,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
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
        """`address:port` Docker published the server on (`docker port`); None on
        the isolated network."""
        self.network: str | None = None
        """The Docker network the container runs on."""
        self.address: str | None = None
        """`ip:port` the client reaches the server at, on the isolated network."""
        self.user: str | None = None
        """The user the container runs as (`--user`), or None for the image's own."""
        self._auto_user = False
        self.app_choice = None  # the image runs its own command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = run_here
        self._base_url: str | None = None
        self._image_name: str | None = None
        self._lock = threading.Lock()
        self._stopped = False
        self._running = LastSaid(self._runs, False, thread="openenv-v1-docker-state")
        self._run_started = 0.0

    @property
    def container(self) -> str | None:
        """The container's name while it exists."""
        return self._container_name

    @property
    def container_id(self) -> str | None:
        """The container's id once `docker run` returned, while it exists."""
        return self._container_id

    def start(self, **_: object) -> str:
        """Find or build the image and start its container; returns the base URL."""
        self.image = self._image()
        return self.start_container(self.image.image)

    def _image(self) -> EnvImage:
        o = self.options
        chosen = image_for(self.env, o.image, o.project_path, o.tag, o.build_network)
        if chosen.reused is False:  # just built: the env's older images may go
            prune_env_images(chosen.image.rpartition(":")[0], o.keep_images)
        return chosen

    def start_container(self, image: str) -> str:
        """Run a container of `image` (`run_args`); returns its base URL."""
        run = container_run(
            self.env,
            self.options,
            image,
            secret_env=self._secret_env,
            needs_root=image in _needs_root,
        )
        self.user, self._auto_user = run.user, run.auto_user
        with self._lock:
            if self._stopped:
                raise EnvFailure("the Docker launch was stopped")
            self._container_name, self._image_name = run.name, image
        self._run_started = time.monotonic()
        result = self._docker_run(run)
        with self._lock:
            self._container_id = result.stdout.strip()
            stopped = self._stopped
        if stopped:  # stop() ran while `docker run` was under way
            run_docker("rm", "-f", result.stdout.strip(), timeout=60)
            raise EnvFailure("the Docker launch was stopped")
        self.network = run.network
        try:
            if run.publish:
                host_port = self._published_port()
                self._base_url = f"http://{client_host(self.options.host)}:{host_port}"
            else:
                self._base_url = f"http://{self._address()}"
        except _ExitedEarly as e:
            return self._as_root(image, str(e))
        logger.info(
            "%s: container %s of %s at %s (network %s, user %s)",
            self.env,
            run.name,
            image,
            self._base_url,
            run.network,
            self.user or "the image's",
        )
        return self._base_url

    def _docker_run(self, run: ContainerRun) -> subprocess.CompletedProcess[str]:
        """`docker run`, again (`NETWORK_RETRIES` times at most) while the shared
        network went meanwhile; `EnvFailure` with Docker's error when it fails."""
        argv, env = run.argv, run.env
        result = run_docker(*argv, timeout=self.launch_timeout_s, env=env)
        shared = self.options.network is None
        for _ in range(NETWORK_RETRIES):
            if result.returncode == 0 or not shared or not _network_gone(result.stderr):
                break
            # Another owner's reaper removed the idle shared network meanwhile.
            forget(run.network)
            run_docker("rm", "-f", self._container_name or "", timeout=60)
            ensure_network(egress=self.options.egress, again=True)
            result = run_docker(*argv, timeout=self.launch_timeout_s, env=env)
        if result.returncode != 0:
            raise EnvFailure(
                f"`docker run ... {argv[-1]}` failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()}"
            )
        return result

    def _address(self) -> str:
        network = self.network or ""
        address = address_on(self._container_id or "", network)
        if address is None:
            self._raise_if_exited()  # gone before it was asked
            raise EnvFailure(
                f"container {self._container_name} has no address on network {network}"
            )
        self.address = f"{address}:{self.options.container_port}"
        return self.address

    def _published_port(self) -> str:
        published, result = docker_port(
            self._container_id or "", self.options.container_port
        )
        if published is not None:
            self.published = published
            return published.rpartition(":")[2]
        self._raise_if_exited()  # gone before it was asked
        raise EnvFailure(
            f"container {self._container_name} publishes no port for "
            f"{self.options.container_port}/tcp: {result.stderr.strip()}"
        )

    def wait_for_ready(self) -> str:
        """Wait for `/health` to answer 200, for `launch_timeout_s` at most; returns
        the URL it answered at (another after a run again as root)."""
        timeout_s = self.launch_timeout_s
        deadline = time.monotonic() + timeout_s
        url = self._base_url
        try:
            return self._wait(url, deadline, timeout_s)
        except _ExitedEarly as e:
            if self._image_name is None:
                raise EnvFailure(str(e)) from None
            url = self._as_root(self._image_name, str(e))
        try:
            return self._wait(url, deadline, timeout_s)
        except _ExitedEarly as e:
            raise EnvFailure(
                f"{e} (run as root after it exited as uid 65534)"
            ) from None

    def _as_root(self, image: str, exited: str) -> str:
        """After the container exited before it was ready: `EnvFailure`, unless
        `user` "auto" ran it as uid 65534: then it runs as root (its URL returned)."""
        if not self._auto_user:
            raise EnvFailure(exited)
        logger.warning(
            "%s: image %s needs root: its server exited before it was ready as uid "
            f"65534 ({setting('provider_kwargs.user', 'auto')}), so it runs as root, "
            f"without capabilities (set {setting('provider_kwargs.user', 'root')} to "
            "skip the try, or "
            "give the image a USER of its own); as uid 65534: %s",
            self.env,
            image,
            exited,
        )
        _needs_root.add(image)
        self._remove_container()
        return self.start_container(image)

    def _wait(self, url: str | None, deadline: float, timeout_s: float) -> str:
        if self._container_id is None or url is None:
            raise EnvFailure("the Docker launch was not started, or was stopped")
        wait_ready(
            f"{url}/health",
            timeout_s=max(0.0, deadline - time.monotonic()),
            running=self._starting,
            check_every_s=1.0,
            not_ready=lambda: EnvFailure(
                f"container {self._container_name} ({self._image_name}) "
                f"was not ready at {url}/health within {timeout_s:.0f}s (raise "
                f"{setting('launch_timeout_s')} if it is just slow"
                f"{self._reach_hint()}); its log ends with:\n{self.log_tail()}"
            ),
        )
        self.start_seconds = time.monotonic() - self._run_started
        self._running.set(True)
        return url

    def _starting(self) -> bool:
        """Raises once the container exited (or the launch stopped), naming how."""
        if self._container_id is None:
            raise EnvFailure("the Docker launch was not started, or was stopped")
        self._raise_if_exited()
        return True

    def _raise_if_exited(self) -> None:
        """`_ExitedEarly`, saying how, when the container no longer runs."""
        state = container_state(self._container_id or "")
        if state is not None and not state.get("Running"):
            who = "" if self._auto_user else root_hint(self.user)  # auto: as root
            raise _ExitedEarly(
                exit_message(
                    self._container_name,
                    self._image_name,
                    state,
                    self.log_tail(),
                    who,
                )
            )

    def _reach_hint(self) -> str:
        if self.published is not None or self.address is None:
            return ""
        return (
            f"; this host reaches it at {self.address} on the internal network "
            f"{self.network}, which Docker Desktop, rootless Docker and a remote "
            f"DOCKER_HOST cannot: there, set {setting('provider_kwargs.egress', True)} "
            "to publish it on 127.0.0.1"
        )

    def log_tail(self, chars: int | None = None) -> str:
        """The end of the container's log (`container_state.container_log_tail`)."""
        if self._container_id is None:
            return ""
        return container_log_tail(self._container_id, chars)

    def running(self) -> bool:
        """Whether the container runs, as Docker last said (refreshed in the
        background when over a second old: never blocks a lock holder)."""
        return self._container_id is not None and self._running.get(max_age=1.0)

    def _runs(self) -> bool:
        state = container_state(self._container_id or "")
        return bool(state and state.get("Running"))

    def stop(self, grace_s: float = 2.0) -> None:
        """Stop the container (SIGTERM, SIGKILL after `grace_s`) and remove it."""
        self._remove_container(grace_s, last=True)

    def _remove_container(self, grace_s: float = 0.0, *, last: bool = False) -> None:
        """Remove the container (`grace_s` to stop); `last`: no start follows."""
        with self._lock:
            self._stopped = self._stopped or last
            started = self._container_id is not None
            target = self._container_id or self._container_name
            self._container_id = self._container_name = self._base_url = None
        if target is not None:
            remove_container(target, started=started, grace_s=grace_s)


def docker_launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of a `DockerLaunch` for `target`."""
    assert target.env is not None
    provider = DockerLaunch(
        env=target.env,
        options=docker_options(target),
        launch_timeout_s=target.launch_timeout_s,
        secret_env=target.secret_env,
    )
    return LaunchPlan(provider)


class _ExitedEarly(Exception):
    """The container exited before its server was ready; `str()` says how."""


NETWORK_RETRIES = 3
"""Runs again after the shared network was found gone (owners' reapers remove it
when idle, and may race a launch more than once)."""


def _network_gone(stderr: str) -> bool:
    return "network" in stderr and "not found" in stderr
