"""Env servers in Docker containers on this host, and nothing left behind
(docs/docker.md; docs/layout.md maps the modules). `cli.py` is the one place
`docker` runs, but for `reaper.py`, which also runs as a script with no package
imports. Imports nothing itself.
"""
