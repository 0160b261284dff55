"""One Swarm service per env target in this process, and its tasks.

`SwarmService` keeps the shape of OpenEnv's `DockerSwarmProvider` (a service of
`replicas` tasks of one image, removed as a whole) and takes nothing else of it: it
asks nothing up front and never initialises a swarm (an inactive one fails the first
`join()` saying how). Its replicas `join()` and `leave()` it and `claim_task()` a
task each: it is created for the first, scaled up by one for one past its tasks, and
removed by the last; its tasks are read at most once a second unless asked fresh.
Its `docker` commands are `service_commands`'.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import LastSaid, run_docker
from openenv_v1.core.launch.docker.container_state import LOG_TAIL_LINES
from openenv_v1.core.launch.docker.image import EnvImage, image_for, name_for
from openenv_v1.core.launch.docker.options import root_hint
from openenv_v1.core.launch.readiness import client_host
from openenv_v1.core.launch.swarm.options import SwarmOptions
from openenv_v1.core.launch.swarm.service_commands import (
    check_swarm_active,
    create_overlay_network,
    create_service,
    ingress_port,
    remove_service,
    scale_service,
    service_create_args,
)
from openenv_v1.core.launch.swarm.tasks import SwarmTask, live, read_tasks, summary
from openenv_v1.core.setting_names import setting

__all__ = ["SwarmService"]

logger = logging.getLogger(__name__)

_STATE_MAX_AGE_S = 1.0


class SwarmService:
    """One Swarm service for one env target in this process. Thread-safe."""

    def __init__(
        self,
        *,
        env: str,
        options: SwarmOptions,
        launch_timeout_s: float,
        secret_env: Mapping[str, str],
    ) -> None:
        self._service_name: str | None = None
        self._service_id: str | None = None
        self._published_port: int | None = None
        self.env = env
        self.options = options
        self.launch_timeout_s = launch_timeout_s
        self._secret_env = dict(secret_env)
        self.image: EnvImage | None = None
        self.replicas = options.replicas
        self._own_network: str | None = None
        self._lock = threading.RLock()
        self._created = False
        self._failure: str | None = None
        self._removed = False
        self._claims: dict[object, str | None] = {}  # replica -> its task
        self._tasks = LastSaid(self._read_tasks, {}, thread="openenv-v1-swarm")
        self._nodes: dict[str, str] = {}
        self.user: str | None = None  # `--user` of the tasks; None: the image's
        self.egress = (
            options.publish != "local" if options.egress is None else (options.egress)
        )
        if not self.egress and options.publish != "local":
            raise EnvFailure(
                f"{setting('provider_kwargs.publish', options.publish)} publishes "
                "through a network with a way out, so it needs egress: drop "
                f"{setting('provider_kwargs.egress', False)}, or set "
                f"{setting('provider_kwargs.publish', 'local')} (nothing "
                "published, no egress)"
            )

    @property
    def name(self) -> str | None:
        return self._service_name

    # --- the replicas' side ---

    def join(self, replica: object) -> None:
        """Count `replica` as one of the service's servers (creating or scaling it)."""
        with self._lock:
            if self._failure is not None:
                raise EnvFailure(self._failure)
            if self._removed:
                raise EnvFailure("the Swarm service was removed")
            self._claims[replica] = None
            if not self._created:
                try:
                    self._create()
                except EnvFailure as e:
                    self._failure = str(e)
                    raise
                return
            wanted = len(self._claims)
            if self.options.publish == "ingress":
                wanted += self.options.replicas - 1
            if wanted > self.replicas:
                self._scale(wanted)

    def leave(self, replica: object) -> bool:
        """Forget `replica`; True when it was the last (the caller then removes it)."""
        with self._lock:
            self._claims.pop(replica, None)
            last = not self._claims and not self._removed
            if last:
                self._removed = True
            return last

    def claim_task(self, replica: object, deadline: float) -> SwarmTask:
        """A live task no other replica serves, for `replica`, waiting for Swarm to
        start one until `deadline`."""
        while True:
            tasks = self.tasks(max_age=0.0)
            with self._lock:
                if self._removed or replica not in self._claims:
                    raise EnvFailure("the Swarm launch was stopped")
                # In ingress mode every replica is the one address: none is taken.
                ingress = self.options.publish == "ingress"
                local = self.options.publish == "local"
                taken = set() if ingress else {t for t in self._claims.values() if t}
                for task in tasks.values():
                    reachable = task.address if local else (task.port or ingress)
                    if live(task) and reachable and task.id not in taken:
                        self._claims[replica] = task.id
                        return task
            # Only failures: Swarm has nothing starting that could be claimed.
            failed = [t for t in tasks.values() if t.state in {"failed", "rejected"}]
            if failed and not any(live(t) for t in tasks.values()):
                raise EnvFailure(self.task_failure(failed[-1]))
            if time.monotonic() >= deadline:
                raise EnvFailure(
                    f"Swarm service {self._service_name} ({self._image_ref()}) had no "
                    f"task with an address within {self.launch_timeout_s:.0f}s "
                    f"(tasks: {summary(tasks)}); raise "
                    f"{setting('launch_timeout_s')} if the image is just slow to pull"
                )
            time.sleep(0.5)

    def url_of(self, task: SwarmTask) -> str:
        if self.options.publish == "ingress":
            return f"http://{self.options.host or '127.0.0.1'}:{self._published_port}"
        host = self.options.host or self._node_address(task.node)
        return f"http://{host}:{task.port}"

    def task(self, task_id: str, max_age: float = _STATE_MAX_AGE_S) -> SwarmTask | None:
        return self.tasks(max_age).get(task_id)

    def tasks(self, max_age: float = _STATE_MAX_AGE_S) -> dict[str, SwarmTask]:
        """The service's tasks as Swarm last said (`LastSaid.get(max_age)`)."""
        return dict(self._tasks.get(max_age))

    def task_failure(self, task: SwarmTask) -> str:
        return (
            f"Swarm task {task.id[:12]} of service {self._service_name} "
            f"({self._image_ref()}) is {task.state}: {task.error or 'no error given'}"
            f"{root_hint(self.user)}; its log ends with:\n{self.log_tail(task.id)}"
        )

    @property
    def network(self) -> str | None:
        """The network the tasks run on."""
        return self._own_network or self.options.network

    def log_tail(self, task_id: str, lines: int = LOG_TAIL_LINES) -> str:
        result = run_docker(
            "service", "logs", "--raw", "--tail", str(lines), task_id, timeout=15
        )
        return (result.stdout + result.stderr).strip()

    # --- the service ---

    def _create(self) -> None:
        """Create the service, its image found or built first, and its own network."""
        check_swarm_active()
        o = self.options
        self.image = image_for(
            self.env, o.image, o.project_path, o.tag, o.build_network
        )
        self._service_name = name_for(self.image.image, "swarm")
        if self.options.network is None:
            network = f"{self._service_name}-net"
            create_overlay_network(network, egress=self.egress, env=self.env)
            self._own_network = network
        argv, env = self.create_args(self.image)
        self._created = True
        self._service_id = create_service(
            argv, env, self.image.image, self.launch_timeout_s
        )
        if self.options.publish == "ingress":
            self._published_port = ingress_port(
                self._service_id, self._service_name, self.options.container_port
            )
        logger.info(
            "%s: Swarm service %s of %s, %d task(s), %s-mode publishing",
            self.env,
            self._service_name,
            self.image.image,
            self.replicas,
            self.options.publish,
        )

    def create_args(
        self, image: EnvImage, env_vars: Mapping[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The `docker service create` arguments and the environment they read the
        server's variables from (by name: values never on argv)."""
        assert self._service_name is not None
        env = {**self.options.env_vars, **(env_vars or {}), **self._secret_env}
        argv, self.user = service_create_args(
            self._service_name,
            self.options,
            image,
            replicas=self.replicas,
            network=str(self.network),
            env_name=self.env,
            env=env,
        )
        return argv, env

    def _scale(self, replicas: int) -> None:
        scale_service(self._service_id or "", self._service_name, replicas)
        self.replicas = replicas

    def remove(self, grace_s: float | None = None) -> None:
        """Remove the service, then its own network (`remove_service`)."""
        with self._lock:
            self._removed = True
            service_id = self._service_id
            target = service_id or self._service_name
            network, self._own_network = self._own_network, None
        grace = self.options.stop_grace_s if grace_s is None else grace_s
        remove_service(target, service_id, network, grace)

    # --- internals ---

    def _read_tasks(self) -> dict[str, SwarmTask]:
        return read_tasks(self._service_id, self.network, self.options)

    def _node_address(self, node: str) -> str:
        if node not in self._nodes:
            result = run_docker("node", "inspect", "--format", "{{.Status.Addr}}", node)
            address = result.stdout.strip() if result.returncode == 0 else ""
            self._nodes[node] = client_host(address) if address else "127.0.0.1"
        return self._nodes[node]

    def _image_ref(self) -> str:
        return self.image.image if self.image else "?"
