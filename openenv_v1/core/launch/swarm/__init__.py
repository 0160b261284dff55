"""Env servers as a Docker Swarm service, hardened and owned (docs/swarm.md;
docs/layout.md maps the modules). The pool sees servers, not services: each
`SwarmReplica` is one task of the process's service for its target. Imports nothing
itself.
"""
