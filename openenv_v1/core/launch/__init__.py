"""Where an env server runs, and who owns it.

From an `EnvTarget` to a connected OpenEnv client whose server (if one was started)
stops with the caller's exit stack:

    target.py         open_env: base_url, a pooled server's session, or a launch of
                      one's own
    plan.py           the Launcher protocol every place implements, LaunchPlan,
                      and launch_plan: which place serves a target (UV, Docker,
                      `provider`)
    readiness.py      the one wait for a started server's /health
    uv.py             a server started with uv, in OpenEnv's provider interface,
                      owning its process tree; uv_starts.py (which app, port and
                      gradio each start has, and what follows a crashed one),
                      uv_server.py (what a start runs: command, environment,
                      output), uv_prepared.py (the project's prepared environment),
                      cache.py (all of them, listed and pruned),
                      uv_diagnosis.py (what a crashed server's output says)
    docker/           containers on this host: the container, its options, image,
                      build and build context, old images, networks, the Swarm
                      gateway, the reaper, the `docker` client
    swarm/            a Swarm service's tasks as servers: options, service, tasks,
                      replicas
    cloud.py          OpenEnv's cloud sandbox providers behind the launcher face
    pool.py           ServerPool: servers launched once and leased by many rollouts;
                      pool_servers.py (its records of its servers),
                      pool_launch.py (how each comes up), pool_growth.py (how
                      many it launches, and what stops it)
    url_pool.py       UrlPool: the running servers of a base_url list, leased as
                      the pool's are
    lease_book.py     what both desks lease with: their leases, the requests
                      waiting for room, and the lease calls
    leases.py         both ends of a lease: in process, and over the pool's endpoint
    env_target.py     EnvTarget: where an episode's environment comes from
    env_project.py    what an env folder's files say about serving it
    server_env.py     what an env server's process may see (its environment)
    options.py        provider_kwargs read into a launcher's own options
    process_group.py  a process group and a parent-death signal per child, started
                      and stopped (TERM, a grace, KILL) in one place; the one
                      /proc reader

Imports follow the tree, top to bottom, at module and function level alike:
`target` -> `plan` -> the places (`uv`, `docker.container`, `swarm.replica`,
`cloud`, imported by name when a target asks for one; they import `plan` for
`LaunchPlan` and `run_here`); `target` -> `url_pool`; `pool` -> `pool_launch`
-> `plan`; `pool` and `url_pool` -> `leases`, `lease_book`, `pool_servers`;
`pool` -> `pool_growth`;
`env_target` and `leases`, `env_project`, `server_env`, `options`, `readiness` and
`process_group` at the bottom. Nothing below `target` imports it; the places name
`EnvTarget` for its type only. No circle.

May import `openenv_v1.core`'s shared modules (`errors`, `openenv_lines`,
`light_import`, `local_http`, `manifest`, `http_client`) and OpenEnv; never
`openenv_v1.core.episode` (an episode asks for a client, a launch never plays one) and
never verifiers. Imports nothing itself, so `process_group` (say) loads alone.
"""
