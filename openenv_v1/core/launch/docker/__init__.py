"""Env servers in Docker containers on this host, and nothing left behind.

    container.py  DockerLaunch: a container in OpenEnv's provider shape, as a
                  launcher: started, waited for, run again as root, stopped
    run_args.py   its `docker run`: network, published port, hardening (labels,
                  limits, no capabilities, an unprivileged user), variables by name
    container_state.py  what Docker says of it (state, log, how it exited), and
                  its removal
    options.py    ImageOptions (the keys of every image launch, Swarm's too) and
                  DockerOptions, read and checked; the limits and user they put
                  on `docker run` or `docker service create`
    image.py      the image a launch runs: given, the Space's, or one built from
                  the env's folder (tagged by a hash of what it is made of); a
                  unique name for a container or service of it
    build.py      `docker build` of that image: arguments, network, one at a time,
                  a failure that names its step
    context.py    the build context: the env folder or its repository's root
    prune.py      an env folder's old images go when a new one is built
    network.py    the networks containers run on: no egress, no neighbours
    gateway.py    a loopback way in to a Swarm task that publishes nothing
    reaper.py     labels on everything started, and a reaper per owner process
    cli.py        the `docker` client to run, the one place it is run
                  (`call_docker`, `run_docker`), `docker port` read (`docker_port`),
                  and `LastSaid` (an answer of Docker's refreshed in the background)

Imports within go down this list's dependencies: `container` -> `run_args`,
`container_state`, `options`, `image`, `network`, `prune`; `run_args` -> `options`,
`image`, `network`, `reaper`; `options` -> `image`; `image` -> `build`, `context` (its
`ARG` reading too); everything that runs `docker` -> `cli`. Outside `docker/` only `openenv_v1.core`'s
shared modules (`errors`, `openenv_lines`, `setting_names`), `launch`'s `options`,
`plan` and `readiness`, and `launch.env_target` (for its type). Imports nothing
itself; `reaper.py` also runs as a script with no package imports.
"""
