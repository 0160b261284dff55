# Put first on the PYTHONPATH of launched env servers whose project does not declare
# gradio, by `SupervisedUVProvider`: OpenEnv imports gradio only for its optional web
# UI and carries on without it, and the import costs several seconds of every server
# start. See launch/uv.py.
raise ModuleNotFoundError(
    "gradio is hidden from this env server by openenv-v1, since the env does not "
    "declare it: set task.user.server_web_ui = true (openenv-v1 check --web-ui)",
    name="gradio",
)
