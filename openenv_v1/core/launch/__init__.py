"""Where an env server runs, and who owns it: from an `EnvTarget` to a connected
OpenEnv client whose server (if one was started) stops with the caller's exit stack.
docs/layout.md maps the modules and the direction of their imports; this package
never imports `openenv_v1.core.episode` nor verifiers, and imports nothing itself.
"""
