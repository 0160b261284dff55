"""The compatibility run over an OpenEnv checkout's envs (`run.py`; README.md here).

Not shipped in the wheel: a developer's tool, run from a checkout."""
