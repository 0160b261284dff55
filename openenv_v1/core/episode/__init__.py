"""What one episode does against a connected OpenEnv client (docs/layout.md maps its
modules). May import the core's shared modules and OpenEnv; from `core.launch` only
what opens an episode's client; never verifiers (`tests/test_layout.py` checks).
"""
