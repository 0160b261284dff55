"""Run every env of an OpenEnv checkout through `openenv-v1 check` and a short `eval`.

    uv run python compatibility/run.py --envs-dir /path/to/OpenEnv/envs
    uv run python compatibility/run.py --envs-dir ... --only chess_env,maze_env --json

For each env folder (one uv project each), one at a time:

1. `openenv-v1 check --project-path DIR/<env> --json` with a `--reset` and an
   `--action` (a reply as a model would write it) from `ENVS` below, which were
   written from each env's action model and reset signature.
2. Where `ENVS` has a script of replies: a real `eval openenv-v1 --taskset.env
   local/<env> ...` of one rollout against the local policy in `script` mode
   (`python -m openenv_v1.local_policy --mode script`), null harness, no push.

Envs known not to run offline (or without an account, a GPU, a simulator...) are
listed in `ENVS` with the cause and are not run unless `--all`.

It prints a markdown table: env | check | eval | notes. A failure is marked "env's
own need" when its cause belongs to the env (a missing download, key, binary or
dependency), and "adapter?" otherwise: those are worth a look. After each env it
looks for processes it started that are still alive (servers under the env's
folder or prepared venv) and reports and stops them.

Every process it starts runs in its own process group and is stopped (SIGTERM, then
SIGKILL) when its env is done, on a timeout, and on Ctrl-C or SIGTERM.

The env servers' prepared venvs go where openenv-v1 puts them (set
OPENENV_V1_CACHE_DIR to choose). A first launch installs the env's dependencies:
`--launch-timeout` (default 600 s) covers it.

`--docker` runs each env in a container built from the env folder's own Dockerfile
on this host's Docker engine instead (the image is tagged by a hash of the folder and
reused on the next run). `--provider swarm` (with `--provider-kwargs '{"publish":
"host"}'`) runs the same images as a Swarm service.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from importlib.metadata import version
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repo root makes the package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compatibility.commands import LINE
from compatibility.processes import Interrupted, interrupt
from compatibility.report import Result, table
from compatibility.runner import run_env


def env_names(envs_dir: Path, only: str | None) -> list[str]:
    found = sorted(
        p.name for p in envs_dir.iterdir() if (p / "pyproject.toml").is_file()
    )
    if not only:
        return found
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    missing = [n for n in wanted if n not in found]
    if missing:
        raise SystemExit(f"not env folders of {envs_dir}: {', '.join(missing)}")
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs-dir", required=True, type=Path)
    parser.add_argument("--only", help="comma-separated env folder names")
    parser.add_argument("--all", action="store_true", help="also run known-skipped")
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    parser.add_argument("--no-eval", action="store_true", help="checks only")
    parser.add_argument("--launch-timeout", type=float, default=600.0)
    parser.add_argument("--step-timeout", type=float, default=30.0)
    parser.add_argument("--keep-logs", help="copy each eval's stderr here")
    parser.add_argument(
        "--docker",
        action="store_true",
        help="run each env in a container built from its own unmodified Dockerfile, "
        "on this host's Docker engine (`check --use-docker`, `eval --taskset.use-docker "
        "--taskset.docker-on-host`); needs the OpenEnv base image (in tests: "
        "`python3 -m tests.docker_engine up`)",
    )
    parser.add_argument(
        "--provider",
        help="where env servers run, as the taskset's `provider` (e.g. swarm on this "
        "host's one-node swarm: `docker swarm init --advertise-addr 127.0.0.1`)",
    )
    parser.add_argument(
        "--provider-kwargs",
        type=json.loads,
        default={},
        help='more provider options as JSON, e.g. \'{"publish": "host", "replicas": 2}\'',
    )
    args = parser.parse_args(argv)
    envs_dir = args.envs_dir.resolve()
    names = env_names(envs_dir, args.only)

    print(f"verifiers {version('verifiers')} ({LINE})", file=sys.stderr, flush=True)
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    results: list[Result] = []
    try:
        for env in names:
            print(f"== {env}", file=sys.stderr, flush=True)
            started = time.monotonic()
            result = run_env(env, envs_dir, args)
            results.append(result)
            print(
                f"   check {result.check}, eval {result.eval} "
                f"({time.monotonic() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
    except (Interrupted, KeyboardInterrupt):
        print("interrupted: stopped what was running", file=sys.stderr)
        done = {r.env for r in results}
        results += [Result(env, "interrupted", "-") for env in names if env not in done]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
