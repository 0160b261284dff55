"""The parts of `benchmarks/scale.py`, one job each.

procs.py       the process table: the leg's processes, their memory, leftovers
results.py     a leg's result, and what its traces say (ok, step times, replies)
eval_legs.py   legs that run one `eval` / `vf-eval`: vf02, vf04, floor
server_leg.py  the trainer's path: verifiers 0.4's env server and `EnvClient.run`
raw_leg.py     a bare OpenEnv client per episode, unpaced or paced by the policy
report.py      the table (with `p99/raw` and `wall/floor`) and the soak series
"""
