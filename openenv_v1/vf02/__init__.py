"""The verifiers 0.2 binding of `openenv_v1.core`: a taskset whose per-rollout user
simulator (`vf.User`) plays one OpenEnv episode (its modules: `docs/layout.md`).

Imports run one way: `taskset` -> `user` -> `tool_desk` -> `account` -> `state` (and
`user` -> `config`); `tools`, the eval's tool server, -> `tool_desk`, `state`. Only
`taskset` imports `user`; `simulator/` imports none of these (`tests/test_layout.py`
fails on any circle).

`openenv_v1` exports these classes when verifiers 0.2 is installed.
"""
