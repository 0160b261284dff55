# Put first on the PYTHONPATH of launched env servers by `SupervisedUVProvider`:
# OpenEnv imports gradio only for its optional web UI and carries on without it, and
# the import costs several seconds of every server start. See uv_launch.py.
raise ModuleNotFoundError(
    "gradio is hidden from this env server by openenv-v1 to speed up its start; set "
    "task.user.server_web_ui = true if the env needs gradio",
    name="gradio",
)
