"""Env servers as a Docker Swarm service, hardened and owned.

OpenEnv's `DockerSwarmProvider` creates a replicated service published through the
routing mesh (`--publish PORT:8000`), with no limits, no owner, and `docker` from PATH.
`SwarmService` keeps its shape (a service of `replicas` tasks of one image, an
optional overlay network, removed as a whole), takes no code of it, and:

- runs the image the Docker launch would (`docker.image.image_for`: `image`, one
  built from `project_path`'s Dockerfile, or the Space's);
- publishes nothing by default (`publish` "local"): its tasks run on an internal
  overlay network of their own (no egress), and each task the pool uses is reached
  through a gateway container on this node published on 127.0.0.1 only
  (`docker.gateway`). Publishing on every interface is opt-in: `host`, each task
  publishes its own port on its node (Swarm picks it), found from the task's status
  or its container; `ingress`, the routing mesh: one port on every node, connections
  balanced over the tasks (it needs the kernel's IPVS). Both need a network with a
  way out (`egress`);
- takes the keys every launch of an image takes (`docker.options.ImageOptions`) and
  applies the Docker launch's hardening and limits where Swarm has them, spelt for
  `docker service create` (`docker.options.limit_args`, `run_as`): `--cap-drop
  ALL`, a non-root user where the image allows, memory, pids, cpus, read-only root,
  `--init` (Swarm 20.10 has no swap limit and no `no-new-privileges`: see
  docs/swarm.md);
- puts its tasks on an overlay network of their own (or the `network` named), and
  labels the service, its containers and that network with the owner process and run
  (`docker.reaper`): the owner's reaper removes all three when the owner is gone,
  however it ends;
- passes `env_vars` by name only, like the Docker launch.

The pool sees servers, not services: each `SwarmReplica` (what `swarm_launch_plan`
returns, one per launch) is one task of the process's service for that target. The
first creates the service with `replicas` tasks; the next ones claim the other tasks;
one launched while every task is claimed scales the service up by one. In host mode
each replica is its own server at its own port, and a `ServerPool` launches
`replicas` of them at start (the plan's `servers_at_start`), so sessions spread over the tasks
by the pool's least-busy choice and a task at its session limit is handled as any
shared server is. In ingress mode there is one address: the pool starts one server
there, and each further one adds a task behind the same address. The last replica
stopped removes the service and its network.

    replica = swarm_launch_plan(EnvTarget(env="org/maze", provider="swarm",
        provider_kwargs={"project_path": "envs/maze_env", "publish": "host"})).launcher
    replica.start(); url = replica.wait_for_ready(); ...; replica.stop()

    options.py  SwarmOptions: the image's keys of provider_kwargs and Swarm's own
    service.py  SwarmService: one service per target in this process, its
                replicas' claims on its tasks, when it is created, scaled, removed
    service_commands.py  the `docker` commands that make it (its network, its
                `docker service create`), scale it and remove it
    tasks.py    the service's tasks as Docker reports them
    replica.py  SwarmReplica (one task as one server) and `swarm_launch_plan`

Imports within: `replica` -> `service` -> `service_commands`, `tasks`, `options`. Outside `swarm/`:
`launch.docker` (the image, client, options, gateway, reaper labels), `launch`'s
`plan` and `readiness`, `openenv_v1.core`'s shared modules, and `launch.env_target`
for its type. Imports nothing itself.
"""
