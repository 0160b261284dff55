# Put first on the PYTHONPATH of launched env servers whose project does not declare
# gradio, by `SupervisedUVProvider`: OpenEnv imports gradio only for its optional web
# UI and carries on without it, and the import costs several seconds of every server
# start. See launch/uv.py. The setting is written as its token by hand (this runs in
# the env server, without openenv_v1): the surface that shows the server's output
# renders it (core/setting_names.py).
raise ModuleNotFoundError(
    "gradio is hidden from this env server by openenv-v1, since the env does not "
    "declare it: turn on `server_web_ui`",
    name="gradio",
)
