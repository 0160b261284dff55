"""The verifiers 0.2 binding of `openenv_v1.core`: a taskset whose per-rollout user
simulator (`vf.User`) plays one OpenEnv episode.

- `config.py`: `OpenEnvConfig` (under `--taskset.*`) and the user simulator's settings;
- `taskset.py`: the taskset core (`openenv_v1.taskset_core`: tasks, the shared servers'
  pool) handed to the user simulators; reward, stops, metrics;
- `state.py`: `OpenEnvState`, the rollout's state the simulator and the eval share;
- `user.py`: the user simulator that keeps the env session;
- `flags.py`: how `eval` spells a setting the core's messages name (`EVAL_FLAGS`);
- `account.py`: the episode account (the core's `EpisodeReport`) on the rollout state;
- `tools.py`, `tool_desk.py`: native tool calling (the eval's tool server, and the
  simulator's side of each call);
- `harness.py`: `OpenEnvHarness`, the model's side in the eval process (the default
  harness of the `openenv-v1` ids);
- `null_harness.py`: verifiers 0.2.1's null harness made to work with tools;
- `simulator/`: the simulator's process machinery (forks, slots, light imports, MCP
  clients), which imports nothing of the binding (it runs `user.py` by name).

Imports run one way: `taskset` -> `user` -> `tool_desk` -> `account` -> `state` (and
`user` -> `config`); `tools`, the eval's tool server, -> `tool_desk`, `state`. Only
`taskset` imports `user`; `simulator/` imports none of these (`tests/test_layout.py`
fails on any circle).

`openenv_v1` exports these classes when verifiers 0.2 is installed.
"""
