"""Where an env server runs, and who owns it.

From an `EnvTarget` to a connected OpenEnv client whose server (if one was started)
stops with the caller's exit stack:

    target.py         EnvTarget, open_env: base_url, a pooled server's session, or a
                      launch of one's own
    plan.py           launch_plan: which launcher serves a target (UV, Docker,
                      `provider`)
    uv.py             OpenEnv's UV provider, extended to own its process tree
    docker/           containers on this host: the container, its image, build
                      context, old images, networks, the Swarm gateway, the reaper
    swarm.py          a Swarm service's tasks as servers
    cloud.py          OpenEnv's cloud sandbox providers behind the launcher face
    pool.py           ServerPool: servers launched once and leased by many rollouts
    env_project.py    what an env folder's files say about serving it
    server_env.py     what an env server's process may see (its environment)
    process_group.py  a process group and a parent-death signal per child

May import `openenv_v1.core`'s shared modules (`errors`, `openenv_lines`,
`light_import`, `local_http`, `manifest`, `http_client`) and OpenEnv; never
`openenv_v1.core.episode` (an episode asks for a client, a launch never plays one) and
never verifiers. Imports nothing itself, so `process_group` (say) loads alone.
"""
