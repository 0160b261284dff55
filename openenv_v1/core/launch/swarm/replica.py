"""The servers a `ServerPool` sees of a Swarm service: one `SwarmReplica` per task.

Each launch of a target is a replica of this process's service for it: the first
creates the service with `replicas` tasks, the next claim the other tasks, one past
them scales it up by one, and the last stopped removes it. With `publish` "local"
a replica reaches its task through a loopback gateway (`docker.gateway`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import docker_cli
from openenv_v1.core.launch.docker.gateway import Gateway
from openenv_v1.core.launch.plan import LaunchPlan, run_here
from openenv_v1.core.launch.readiness import wait_ready
from openenv_v1.core.launch.swarm.options import swarm_options
from openenv_v1.core.launch.swarm.service import SwarmService
from openenv_v1.core.launch.swarm.tasks import ENDED, live
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget


class SwarmReplica:
    """One server of a Swarm service: a task, as a `plan.Launcher`. `stop()` is
    idempotent; the last replica of a service removes it."""

    def __init__(self, service: SwarmService, key: str) -> None:
        self.service = service
        self._key = key
        self.app_choice = None  # the image runs its own command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = run_here
        self.start_seconds: float | None = None
        self.task_id: str | None = None
        self.gateway: Gateway | None = None  # to its task, with `publish` "local"
        self._url: str | None = None
        self._joined = False
        self._stopped = False
        self._started_at = 0.0

    def start(self, **_: object) -> str:
        """Join the service and claim a task of it; returns that task's base URL."""
        self._started_at = time.monotonic()
        if self._stopped:
            raise EnvFailure("the Swarm launch was stopped")
        self._joined = True
        self.service.join(self)
        if self._stopped:  # stop() ran while it joined
            if self.service.leave(self):
                _forget(self._key, self.service)
                self.service.remove()
            raise EnvFailure("the Swarm launch was stopped")
        deadline = self._started_at + self.service.launch_timeout_s
        task = self.service.claim_task(self, deadline)
        self.task_id = task.id
        if self.service.options.publish != "local":
            self._url = self.service.url_of(task)
            return self._url
        assert task.address is not None and self.service.image is not None
        gateway = Gateway.start(
            self.service.image.image,
            str(self.service.network),
            task.address,
            self.service.options.container_port,
            env=self.service.env,
        )
        self.gateway = gateway
        if self._stopped:  # stop() ran while the gateway started
            gateway.stop()
            raise EnvFailure("the Swarm launch was stopped")
        self._url = gateway.url
        return self._url

    def wait_for_ready(self) -> str:
        """Wait for `/health` to answer 200, for the launch timeout at most; a task
        that ends first fails at once with Swarm's error and its log tail."""
        url = self._url
        timeout_s = self.service.launch_timeout_s
        if self._stopped or url is None or self.task_id is None:
            raise EnvFailure("the Swarm launch was not started, or was stopped")
        task_id = self.task_id
        wait_ready(
            f"{url}/health",
            timeout_s=timeout_s,
            running=self._starting,
            check_every_s=1.0,
            not_ready=lambda: EnvFailure(
                f"Swarm task {task_id[:12]} of {self.service.name} was "
                f"not ready at {url}/health within {timeout_s:.0f}s (raise "
                f"{setting('launch_timeout_s')} if it is just slow; in ingress mode "
                "the routing mesh needs IPVS in the kernel, else use publish "
                "host); its log ends with:\n"
                f"{self.service.log_tail(task_id)}"
            ),
        )
        self.start_seconds = time.monotonic() - self._started_at
        return url

    def _starting(self) -> bool:
        """Raises once its task ended, or the launch was stopped."""
        if self._stopped or self.task_id is None:
            raise EnvFailure("the Swarm launch was not started, or was stopped")
        task = self.service.task(self.task_id, max_age=0.0)
        if task is not None and task.state in ENDED:
            raise EnvFailure(self.service.task_failure(task))
        return True

    def running(self) -> bool:
        """Whether its task runs, as Swarm last said (never blocks)."""
        if self.task_id is None or self._stopped:
            return False
        task = self.service.task(self.task_id)
        return task is None or live(task)

    def stop(self, grace_s: float | None = None) -> None:
        """Stop serving; the last replica of the service removes it and its network
        (earlier ones leave their task running for the others)."""
        if self._stopped:
            return
        self._stopped = True
        if self.gateway is not None:
            self.gateway.stop()
        if self._joined and self.service.leave(self):
            _forget(self._key, self.service)
            self.service.remove(grace_s)


_services_lock = threading.Lock()
_services: dict[str, SwarmService] = {}  # by what they run


def swarm_launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of a `SwarmReplica` of this process's service for `target`; a pool
    launches every task at start, but in ingress mode (one address)."""
    assert target.env is not None
    options = swarm_options(target)
    digest = hashlib.sha256()
    for part in (
        target.env,
        options.model_dump_json(),
        json.dumps(sorted(target.secret_env.items())),
        docker_cli(),
        os.environ.get("DOCKER_HOST", ""),
    ):
        digest.update(part.encode() + b"\0")
    key = digest.hexdigest()
    with _services_lock:
        service = _services.get(key)
        if service is None:
            service = SwarmService(
                env=target.env,
                options=options,
                launch_timeout_s=target.launch_timeout_s,
                secret_env=target.secret_env,
            )
            _services[key] = service
    at_start = options.replicas if options.publish != "ingress" else 1
    return LaunchPlan(SwarmReplica(service, key), servers_at_start=at_start)


def _forget(key: str, service: SwarmService) -> None:
    with _services_lock:
        if _services.get(key) is service:
            del _services[key]
