"""Env servers in Docker containers on this host, and nothing left behind.

    container.py  DockerLaunch: OpenEnv's Docker provider, extended (loopback ports,
                  limits, no capabilities, an unprivileged user, labels)
    image.py      the image a launch runs: given, or built from the env's folder
    context.py    the build context: the env folder or its repository's root
    prune.py      an env folder's old images go when a new one is built
    network.py    the networks containers run on: no egress, no neighbours
    gateway.py    a loopback way in to a Swarm task that publishes nothing
    reaper.py     labels on everything started, and a reaper per owner process

Imports nothing itself; `reaper.py` also runs as a script with no package imports.
"""
