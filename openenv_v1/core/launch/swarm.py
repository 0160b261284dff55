"""Env servers as a Docker Swarm service: OpenEnv's Swarm provider, extended.

OpenEnv's `DockerSwarmProvider` creates a replicated service published through the
routing mesh (`--publish PORT:8000`), with no limits, no owner, and `docker` from PATH.
`SwarmService` keeps its shape (a service of `replicas` tasks of one image, an
optional overlay network, removed by `stop_container()`) and:

- runs the image the Docker launch would (`docker_image.image_for`: `image`, one
  built from `project_path`'s Dockerfile, or the Space's);
- publishes nothing by default (`publish` "local"): its tasks run on an internal
  overlay network of their own (no egress), and each task the pool uses is reached
  through a gateway container on this node published on 127.0.0.1 only
  (`docker_gateway`). Publishing on every interface is opt-in: `host`, each task
  publishes its own port on its node (Swarm picks it), found from the task's status
  or its container; `ingress`, the routing mesh: one port on every node, connections
  balanced over the tasks (it needs the kernel's IPVS). Both need a network with a
  way out (`egress`);
- applies the Docker launch's hardening and limits where Swarm has them:
  `--cap-drop ALL`, a non-root user where the image allows, memory, pids, cpus,
  read-only root, `--init` (Swarm 20.10 has no swap limit and no
  `no-new-privileges`: see docs/swarm.md);
- puts its tasks on an overlay network of their own (or the `network` named), and
  labels the service, its containers and that network with the owner process and run
  (`docker_reaper`): the owner's reaper removes all three when the owner is gone,
  however it ends;
- passes `env_vars` by name only, like the Docker launch.

The pool sees servers, not services: each `SwarmReplica` (what `swarm_launch_plan`
returns, one per launch) is one task of the process's service for that target. The
first creates the service with `replicas` tasks; the next ones claim the other tasks;
one launched while every task is claimed scales the service up by one. In host mode
each replica is its own server at its own port, and a `ServerPool` launches
`replicas` of them at start (`servers_at_start`), so sessions spread over the tasks
by the pool's least-busy choice and a task at its session limit is handled as any
shared server is. In ingress mode there is one address: the pool starts one server
there, and each further one adds a task behind the same address. The last replica
stopped removes the service and its network.

    provider, start_args = swarm_launch_plan(EnvTarget(env="org/maze", provider="swarm",
        provider_kwargs={"project_path": "envs/maze_env", "publish": "host"}))
    url = provider.start(**start_args); provider.wait_for_ready(); ...; provider.stop()
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.build import BuildNetwork
from openenv_v1.core.launch.docker.cli import docker_cli, run_docker
from openenv_v1.core.launch.docker.gateway import Gateway
from openenv_v1.core.launch.docker.image import EnvImage, image_for, image_user
from openenv_v1.core.launch.docker.options import NOBODY, read_image_options
from openenv_v1.core.launch.docker.reaper import owner_labels
from openenv_v1.core.light_import import without_gradio

with without_gradio():
    from openenv.core.containers.runtime.providers import DockerSwarmProvider

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

logger = logging.getLogger(__name__)

LOG_TAIL_LINES = 40
# Task states (Swarm's) of a task that is gone or will never run.
_ENDED = {"complete", "shutdown", "failed", "rejected", "remove", "orphaned"}
_STATE_MAX_AGE_S = 1.0


class SwarmOptions(BaseModel):
    """The Swarm keys of `provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    image: str | None = None
    """Image to run; on a cluster of more than one node it must be in a registry
    every node can pull from. Unset, one is built from `project_path` (this node
    only), or the Space's image is run."""
    tag: str = "latest"
    """Tag of the Space image (`registry.hf.space/<owner>-<name>:<tag>`)."""
    project_path: str | None = None
    """Local env folder whose Dockerfile is built, as for the Docker launch."""
    replicas: int = Field(2, ge=1)
    """Tasks the service starts with (more are added while all are at their session
    limit, as shared servers are)."""
    publish: Literal["local", "host", "ingress"] = "local"
    """`local`: nothing published; each task the pool uses is reached through a
    gateway container on this node, published on 127.0.0.1 only, over the service's
    own network. Opt-in, on every interface: `host`, each task publishes its own port
    on its node; `ingress`, one port on every node, Swarm's routing mesh balancing
    connections over the tasks (needs IPVS in the kernel). Except in ingress mode
    sessions are spread over the tasks by the pool."""
    egress: bool | None = None
    """Let the tasks open connections out (the internet, the LAN, the cloud metadata
    address). Unset: off with `publish` "local" (the service's overlay network is
    internal), on with `host` or `ingress`, which Swarm publishes only through a
    network with a way out (so egress false with them is an error)."""
    cap_add: list[str] = Field(default_factory=list)
    """Linux capabilities given back (`--cap-add`); every other one is dropped."""
    user: str = "auto"
    """Who the server runs as: `auto` (the image's own user when it names one other
    than root, else uid:gid 65534:65534 with HOME=/tmp; a task that then fails says
    to set `root`), `root`, or any `--user` value, used as given."""
    build_network: BuildNetwork | None = None
    """Network of the image's build, as for the Docker launch."""
    port: int | None = None
    """Ingress mode: the published port; unset, Swarm picks one (30000-32767)."""
    host: str | None = None
    """Address clients reach published ports at; unset, the task's node's address
    (host mode) or 127.0.0.1 (ingress mode, where every node answers)."""
    container_port: int = 8000
    """Port the server listens on inside the container (OpenEnv images: 8000)."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server."""
    memory: str | None = "4g"
    """Memory limit of each task (`--limit-memory`; Swarm sets no swap limit)."""
    pids_limit: int | None = Field(1024, ge=16)
    """Most processes and threads in each task (`--limit-pids`)."""
    cpus: float | None = Field(None, gt=0)
    """CPU limit of each task (`--limit-cpu`); unset, none."""
    read_only: bool = False
    """Read-only root filesystem, with a tmpfs at /tmp."""
    network: str | None = None
    """Existing network to attach the tasks to (neither created nor removed); unset,
    an overlay network of the service's own, removed with it."""
    stop_grace_s: float = Field(2.0, ge=0)
    """Seconds a task gets between SIGTERM and SIGKILL when the service goes."""
    service_args: list[str] = Field(default_factory=list)
    """Extra `docker service create` options, placed before the image (e.g.
    `["--constraint", "node.role==worker"]`)."""


@dataclass(frozen=True)
class _Task:
    id: str
    state: str
    desired: str
    node: str
    port: int | None
    error: str
    address: str | None = None
    """Its IPv4 address on the service's network (what a gateway forwards to)."""


class SwarmService(DockerSwarmProvider):
    """One Swarm service for one env target in this process, and its tasks; see the
    module docstring. Thread-safe.

    OpenEnv's constructor runs `docker version` and `docker swarm init` (when Swarm is
    inactive) through `docker` on PATH; this one asks nothing up front, runs
    `docker_cli()`, and never initialises a swarm by itself: an inactive one fails
    the first `join()` saying how to start one."""

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
        self._overlay_network = options.network
        self._auto_init_swarm = False
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
        self._claims: dict[object, str | None] = {}
        """Replica -> the task it serves (None while it waits for one)."""
        self._tasks: dict[str, _Task] = {}
        self._tasks_at = 0.0
        self._refreshing = False
        self._nodes: dict[str, str] = {}
        self.user: str | None = None
        """The user the tasks run as (`--user`), or None for the image's own."""
        self.egress = (
            options.publish != "local" if options.egress is None else (options.egress)
        )
        if not self.egress and options.publish != "local":
            raise EnvFailure(
                f"provider_kwargs.publish {options.publish!r} publishes through a "
                "network with a way out, so it needs egress: drop egress false, or "
                'use publish "local" (nothing published, no egress)'
            )

    @property
    def name(self) -> str | None:
        return self._service_name

    # --- the replicas' side ---

    def join(self, replica: object) -> None:
        """Count `replica` as one of the service's servers: creates the service for
        the first, scales it up by one for one past its tasks."""
        with self._lock:
            if self._failure is not None:
                raise EnvFailure(self._failure)
            if self._removed:
                raise EnvFailure("the Swarm service was removed")
            self._claims[replica] = None
            if not self._created:
                try:
                    self.start_container("")
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
        """Forget `replica`; True when it was the last (the caller then removes the
        service)."""
        with self._lock:
            self._claims.pop(replica, None)
            last = not self._claims and not self._removed
            if last:
                self._removed = True
            return last

    def claim_task(self, replica: object, deadline: float) -> _Task:
        """A running or starting task no other replica serves, with its published
        port, for `replica`; waits for Swarm to start one until `deadline`."""
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
                    if _live(task) and reachable and task.id not in taken:
                        self._claims[replica] = task.id
                        return task
            # Only failures: Swarm has nothing starting that could be claimed.
            failed = [t for t in tasks.values() if t.state in {"failed", "rejected"}]
            if failed and not any(_live(t) for t in tasks.values()):
                raise EnvFailure(self.task_failure(failed[-1]))
            if time.monotonic() >= deadline:
                raise EnvFailure(
                    f"Swarm service {self._service_name} ({self._image_ref()}) had no "
                    f"task with an address within {self.launch_timeout_s:.0f}s "
                    f"(tasks: {self._summary(tasks)}); raise "
                    "task.user.launch_timeout_s if the image is just slow to pull"
                )
            time.sleep(0.5)

    def url_of(self, task: _Task) -> str:
        if self.options.publish == "ingress":
            return f"http://{self.options.host or '127.0.0.1'}:{self._published_port}"
        host = self.options.host or self._node_address(task.node)
        return f"http://{host}:{task.port}"

    def task(self, task_id: str, max_age: float = _STATE_MAX_AGE_S) -> _Task | None:
        return self.tasks(max_age).get(task_id)

    def tasks(self, max_age: float = _STATE_MAX_AGE_S) -> dict[str, _Task]:
        """The service's tasks as Swarm last said, refreshed when older than
        `max_age` (a refresh for `max_age > 0` runs in the background: never
        blocks)."""
        with self._lock:
            stale = time.monotonic() - self._tasks_at >= max_age
            if not stale:
                return dict(self._tasks)
            if max_age > 0:
                if not self._refreshing:
                    self._refreshing = True
                    threading.Thread(
                        target=self._refresh, name="openenv-v1-swarm", daemon=True
                    ).start()
                return dict(self._tasks)
        self._refresh()
        with self._lock:
            return dict(self._tasks)

    def task_failure(self, task: _Task) -> str:
        who = ""
        if self.user is not None and self.user != "0:0":
            who = (
                f" (it ran as user {self.user}: if the image needs root, set "
                'provider_kwargs.user = "root")'
            )
        return (
            f"Swarm task {task.id[:12]} of service {self._service_name} "
            f"({self._image_ref()}) is {task.state}: {task.error or 'no error given'}"
            f"{who}; its log ends with:\n{self.log_tail(task.id)}"
        )

    @property
    def network(self) -> str | None:
        """The network the tasks run on."""
        return self._own_network or self._overlay_network

    def log_tail(self, task_id: str, lines: int = LOG_TAIL_LINES) -> str:
        result = run_docker(
            "service", "logs", "--raw", "--tail", str(lines), task_id, timeout=15
        )
        return (result.stdout + result.stderr).strip()

    # --- OpenEnv's provider methods, extended ---

    def _ensure_swarm_initialized(self) -> None:
        result = run_docker("info", "--format", "{{.Swarm.LocalNodeState}}")
        state = result.stdout.strip() or "unknown"
        if result.returncode != 0 or state != "active":
            raise EnvFailure(
                f"Docker Swarm is not active on this engine (state {state}; "
                f"{result.stderr.strip() or 'docker info answered'}): run `docker "
                "swarm init --advertise-addr <this host's address>` (127.0.0.1 for a "
                "one-node swarm), or join a swarm as a manager, or pick another "
                "provider"
            )

    def _ensure_overlay_network(self, network: str) -> None:
        labels = owner_labels(docker_cli(), self.env)
        argv = ["network", "create", "--driver", "overlay", "--attachable"]
        if not self.egress:
            argv.append("--internal")
        for key, value in labels.items():
            argv += ["--label", f"{key}={value}"]
        result = run_docker(*argv, network)
        if result.returncode != 0:
            raise EnvFailure(
                f"cannot create the overlay network {network} for the Swarm service: "
                f"{(result.stderr or result.stdout).strip()}"
            )
        self._own_network = network

    def start_container(
        self,
        image: str,
        port: int | None = None,
        env_vars: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> str:
        """Create the service (its image found or built first, `image` ignored) and
        its own network; returns "" (no task has an address yet: see `url_of`)."""
        self._ensure_swarm_initialized()
        self.image = image_for(
            self.env,
            self.options.image,
            self.options.project_path,
            self.options.tag,
            self.options.build_network,
        )
        name = self._generate_service_name(self.image.image).replace("_", "-")
        self._service_name = f"{name[-40:].lstrip('-.')}-{secrets.token_hex(3)}"
        if self._overlay_network is None:
            self._ensure_overlay_network(f"{self._service_name}-net")
        argv, env = self.create_args(self.image, env_vars)
        self._created = True
        result = run_docker(*argv, timeout=self.launch_timeout_s, env=env)
        if result.returncode != 0:
            raise EnvFailure(
                f"`docker service create ... {self.image.image}` failed (exit "
                f"{result.returncode}): {(result.stderr or result.stdout).strip()}"
            )
        self._service_id = result.stdout.strip().splitlines()[-1]
        if self.options.publish == "ingress":
            self._published_port = self._ingress_port()
        logger.info(
            "%s: Swarm service %s of %s, %d task(s), %s-mode publishing",
            self.env,
            self._service_name,
            self.image.image,
            self.replicas,
            self.options.publish,
        )
        return ""

    def create_args(
        self, image: EnvImage, env_vars: Mapping[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The `docker service create` arguments (after `docker`) and the environment
        they read the server's variables from (by name: values never on argv)."""
        options = self.options
        assert self._service_name is not None
        network = self._own_network or self._overlay_network
        env = {**options.env_vars, **(env_vars or {}), **self._secret_env}
        argv = ["service", "create", "--detach", "--quiet", "--init"]
        argv += ["--name", self._service_name, "--replicas", str(self.replicas)]
        argv += ["--network", str(network)]
        if options.publish == "local":
            # Reached at each task's address: no virtual IP (which needs IPVS).
            argv += ["--endpoint-mode", "dnsrr"]
        elif options.publish == "host":
            argv += ["--endpoint-mode", "dnsrr"]
            argv += ["--publish", f"mode=host,target={options.container_port}"]
        else:
            published = f"published={options.port}," if options.port else ""
            argv += ["--publish", f"{published}target={options.container_port}"]
        for key, value in owner_labels(docker_cli(), self.env).items():
            argv += ["--label", f"{key}={value}", "--container-label", f"{key}={value}"]
        argv += self._limits() + self._user_args(image)
        argv += ["--stop-grace-period", f"{math.ceil(options.stop_grace_s)}s"]
        if image.source != "image setting":
            argv.append("--no-resolve-image")  # built or named here: no registry
        for key in env:
            argv += ["--env", key]  # the value comes from the client's environment
        argv += [*options.service_args, image.image]
        return argv, env

    def _user_args(self, image: EnvImage) -> list[str]:
        chosen = self.options.user
        if chosen == "root":
            self.user = "0:0"
        elif chosen != "auto":
            self.user = chosen
        elif image_user(image.image).partition(":")[0] in {"", "root", "0"}:
            self.user = NOBODY
            return ["--user", NOBODY, "--env", "HOME=/tmp"]
        else:
            self.user = None  # the image names a user of its own
            return []
        return ["--user", self.user]

    def _limits(self) -> list[str]:
        options = self.options
        argv = ["--cap-drop", "ALL"]
        for capability in options.cap_add:
            argv += ["--cap-add", capability]
        if options.pids_limit is not None:
            argv += ["--limit-pids", str(options.pids_limit)]
        if options.memory:
            argv += ["--limit-memory", options.memory]
        if options.cpus is not None:
            argv += ["--limit-cpu", str(options.cpus)]
        if options.read_only:
            argv += ["--read-only", "--mount", "type=tmpfs,destination=/tmp"]
        return argv

    def _ingress_port(self) -> int:
        result = run_docker(
            "service",
            "inspect",
            "--format",
            "{{json .Endpoint.Ports}}",
            self._service_id or "",
        )
        with contextlib.suppress(ValueError, TypeError):
            for entry in json.loads(result.stdout) or []:
                if entry.get("TargetPort") == self.options.container_port:
                    return int(entry["PublishedPort"])
        raise EnvFailure(
            f"Swarm service {self._service_name} publishes no port for "
            f"{self.options.container_port}: {result.stderr.strip() or result.stdout}"
        )

    def _scale(self, replicas: int) -> None:
        result = run_docker(
            "service",
            "update",
            "--detach",
            "--quiet",
            "--replicas",
            str(replicas),
            self._service_id or "",
        )
        if result.returncode != 0:
            raise EnvFailure(
                f"cannot scale Swarm service {self._service_name} to {replicas} "
                f"tasks: {(result.stderr or result.stdout).strip()}"
            )
        self.replicas = replicas
        logger.info("Swarm service %s scaled to %d tasks", self._service_name, replicas)

    def stop_container(self, grace_s: float | None = None) -> None:
        """Remove the service, wait (up to its stop grace period and 20 s) for its
        containers on this node to go, then remove its own network (Docker refuses
        while containers are attached; the owner's reaper retries)."""
        with self._lock:
            self._removed = True
            service_id = self._service_id
            target = service_id or self._service_name
            network, self._own_network = self._own_network, None
        if target is not None:
            run_docker("service", "rm", target, timeout=60)
        grace = self.options.stop_grace_s if grace_s is None else grace_s
        deadline = time.monotonic() + grace + 20.0
        label = f"label=com.docker.swarm.service.id={service_id}"
        while service_id is not None and time.monotonic() < deadline:
            left = run_docker("ps", "-aq", "--filter", label)
            if left.returncode != 0 or not left.stdout.strip():
                break
            time.sleep(0.3)
        while network is not None:
            if run_docker("network", "rm", network).returncode == 0:
                return
            if time.monotonic() >= deadline:
                logger.warning(
                    "Swarm network %s is still in use; its owner's reaper removes it",
                    network,
                )
                return
            time.sleep(0.3)

    def wait_for_ready(self, base_url: str, timeout_s: float = 30.0) -> None:
        raise NotImplementedError("SwarmReplica.wait_for_ready waits on one task")

    # --- internals ---

    def _refresh(self) -> None:
        try:
            tasks = self._read_tasks()
            with self._lock:
                self._tasks = tasks
        finally:
            with self._lock:
                self._tasks_at = time.monotonic()
                self._refreshing = False

    def _read_tasks(self) -> dict[str, _Task]:
        if self._service_id is None:
            return {}
        listed = run_docker("service", "ps", "--no-trunc", "-q", self._service_id)
        ids = listed.stdout.split()
        if listed.returncode != 0 or not ids:
            return {}
        result = run_docker("inspect", "--type", "task", *ids)
        try:
            raw = json.loads(result.stdout or "[]")
        except ValueError:
            return {}
        tasks: dict[str, _Task] = {}
        for entry in raw:
            status = entry.get("Status") or {}
            task_id = entry.get("ID", "")
            tasks[task_id] = _Task(
                id=task_id,
                state=status.get("State", ""),
                desired=entry.get("DesiredState", ""),
                node=entry.get("NodeID", ""),
                port=self._task_port(status),
                error=status.get("Err", ""),
                address=self._task_address(entry),
            )
        return tasks

    def _task_address(self, entry: Mapping[str, Any]) -> str | None:
        """The task's IPv4 address on the service's network, once Swarm gave it."""
        for attachment in entry.get("NetworksAttachments") or []:
            network = attachment.get("Network") or {}
            names = {(network.get("Spec") or {}).get("Name"), network.get("ID")}
            if self.network in names:
                for address in attachment.get("Addresses") or []:
                    return str(address).partition("/")[0] or None
        return None

    def _task_port(self, status: Mapping[str, Any]) -> int | None:
        """The task's published port: from its status once it runs, else (a task
        still starting, on this node) from its container."""
        target = self.options.container_port
        for entry in (status.get("PortStatus") or {}).get("Ports") or []:
            if entry.get("TargetPort") == target and entry.get("PublishedPort"):
                return int(entry["PublishedPort"])
        container = (status.get("ContainerStatus") or {}).get("ContainerID")
        if not container or self.options.publish != "host":
            return None
        result = run_docker(
            "inspect", "--format", "{{json .NetworkSettings.Ports}}", container
        )
        with contextlib.suppress(ValueError, TypeError, KeyError):
            for binding in json.loads(result.stdout)[f"{target}/tcp"] or []:
                if binding.get("HostPort"):
                    return int(binding["HostPort"])
        return None

    def _node_address(self, node: str) -> str:
        if node not in self._nodes:
            result = run_docker("node", "inspect", "--format", "{{.Status.Addr}}", node)
            address = result.stdout.strip()
            if result.returncode != 0 or not address or address == "0.0.0.0":
                address = "127.0.0.1"
            self._nodes[node] = address
        return self._nodes[node]

    def _image_ref(self) -> str:
        return self.image.image if self.image else "?"

    @staticmethod
    def _summary(tasks: Mapping[str, _Task]) -> str:
        states = [
            f"{t.id[:12]} {t.state}" + (f" ({t.error})" if t.error else "")
            for t in tasks.values()
        ]
        return ", ".join(states) or "none yet"


class SwarmReplica:
    """One server of a Swarm service: a task, with the provider face `ServerPool`
    and `open_env` drive (`start() -> url`, `wait_for_ready()`, `running()`,
    `stop()`). `stop()` is idempotent; the last replica of a service removes it."""

    def __init__(self, service: SwarmService, key: str) -> None:
        self.service = service
        self._key = key
        self.app_choice = None  # the image runs its own command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = _call
        self.servers_at_start = (
            service.options.replicas if service.options.publish != "ingress" else 1
        )
        """Servers a `ServerPool` launches at once: every task, but in ingress mode."""
        self.start_seconds: float | None = None
        self.task_id: str | None = None
        self.gateway: Gateway | None = None
        """The loopback gateway to its task (`publish` "local")."""
        self._url: str | None = None
        self._joined = False
        self._stopped = False
        self._started_at = 0.0

    def start(self, **_: object) -> str:
        """Join the service (creating or scaling it) and claim a task of it; returns
        that task's base URL (ingress mode: the routing mesh's)."""
        self._started_at = time.monotonic()
        if self._stopped:
            raise EnvFailure("the Swarm launch was stopped")
        self._joined = True
        self.service.join(self)
        if self._stopped:  # stop() ran while it joined
            if self.service.leave(self):
                _forget(self._key, self.service)
                self.service.stop_container()
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

    def wait_for_ready(
        self, base_url: str | None = None, timeout_s: float | None = None
    ) -> None:
        """Poll `/health` until 200; a task that fails or ends first fails at once
        with Swarm's error and its log tail."""
        url = base_url or self._url
        timeout_s = self.service.launch_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        next_check = time.monotonic() + 1.0
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            while True:
                if self._stopped or url is None or self.task_id is None:
                    raise EnvFailure("the Swarm launch was not started, or was stopped")
                with contextlib.suppress(httpx.HTTPError):
                    if http.get(f"{url}/health").status_code == 200:
                        self.start_seconds = time.monotonic() - self._started_at
                        return
                if time.monotonic() >= next_check:
                    next_check = time.monotonic() + 1.0
                    task = self.service.task(self.task_id, max_age=0.0)
                    if task is not None and task.state in _ENDED:
                        raise EnvFailure(self.service.task_failure(task))
                if time.monotonic() >= deadline:
                    raise EnvFailure(
                        f"Swarm task {self.task_id[:12]} of {self.service.name} was "
                        f"not ready at {url}/health within {timeout_s:.0f}s (raise "
                        "task.user.launch_timeout_s if it is just slow; in ingress mode "
                        "the routing mesh needs IPVS in the kernel, else use publish "
                        "host); its log ends with:\n"
                        f"{self.service.log_tail(self.task_id)}"
                    )
                time.sleep(0.1)

    def running(self) -> bool:
        """Whether its task runs, as Swarm last said (never blocks)."""
        if self.task_id is None or self._stopped:
            return False
        task = self.service.task(self.task_id)
        return task is None or _live(task)

    def stop(self, grace_s: float | None = None) -> None:
        """Stop serving; the last replica of the service removes it and its network.
        (A task of a replica stopped earlier keeps running for the others: Swarm
        replaces it if it died.)"""
        if self._stopped:
            return
        self._stopped = True
        if self.gateway is not None:
            self.gateway.stop()
        if self._joined and self.service.leave(self):
            _forget(self._key, self.service)
            self.service.stop_container(grace_s)

    def stop_container(self) -> None:
        self.stop()


def swarm_options(target: EnvTarget) -> SwarmOptions:
    """`provider_kwargs` read as `SwarmOptions` (see `read_image_options`)."""
    return read_image_options(SwarmOptions, target, "Swarm", "provider_kwargs")


_services_lock = threading.Lock()
_services: dict[str, SwarmService] = {}
"""This process's services, by what they run (env, options, server environment)."""


def swarm_launch_plan(target: EnvTarget) -> tuple[SwarmReplica, dict[str, Any]]:
    """A `SwarmReplica` of this process's service for `target` (created by the first
    replica to start) and the keyword arguments of its `start()`."""
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
    return SwarmReplica(service, key), {}


def _forget(key: str, service: SwarmService) -> None:
    with _services_lock:
        if _services.get(key) is service:
            del _services[key]


def _live(task: _Task) -> bool:
    """Swarm wants the task running and it has not ended (it may still start)."""
    return task.desired == "running" and task.state not in _ENDED


def _call(fn: Callable[[], Any]) -> Any:
    return fn()
