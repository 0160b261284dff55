"""Benchmark: the CPU and memory of bringing up a pool's UV servers, forked or not.

    uv run python benchmarks/pool_start.py [--servers 8 32]

For each count N, a `ServerPool` of the local Wordle env (`envs/wordle`, one session
a server) is grown to N servers by N leases taken at once, as an eval's burst does,
twice: with its servers started afresh (`OPENENV_V1_UV_FORKS=0`, each a `uvicorn
APP` process that imports the app) and forked from one template that imported it
(`uvicorn_forks`). Once all N are up, the CPU of every process under this one
(user + system, servers and template) is summed from `/proc`, with their resident
memory (RSS, which counts the pages forked servers share with their template once
per server) and proportional memory (PSS, which splits them), and the pool is
closed. The project's prepared environment is made first, so no leg pays uv's sync.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_v1.core.launch.env_target import EnvTarget  # noqa: E402
from openenv_v1.core.launch.pool import ServerPool  # noqa: E402
from openenv_v1.core.launch.uvicorn_forks import FORKS_VAR  # noqa: E402

WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Leg:
    forked: bool
    servers: int
    up_s: float
    cpu_s: float
    processes: int
    rss_mb: float
    pss_mb: float


def descendants(root: int) -> list[int]:
    """Live processes under `root` (not `root`)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                if stat[0] != "Z":
                    parents[int(entry.name)] = int(stat[1])
    found, frontier = [], {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier}
        found += frontier
    return found


def cpu_rss_pss(pids: list[int]) -> tuple[float, float, float]:
    """CPU seconds, RSS and PSS in MB, summed over `pids`."""
    cpu = rss = pss = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            cpu += (int(fields[11]) + int(fields[12])) / TICK
            rss += int(fields[21]) * PAGE / 1e6
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1e3
    return cpu, rss, pss


def target() -> EnvTarget:
    kwargs = {"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP}
    return EnvTarget(env="local/wordle", provider_kwargs=kwargs, launch_timeout_s=300)


def bring_up(servers: int, forked: bool) -> Leg:
    """A pool grown to `servers` servers, measured, closed."""
    os.environ[FORKS_VAR] = "1" if forked else "0"
    pool = ServerPool(target(), sessions_per_server=1, max_servers=servers)
    started = time.monotonic()
    try:

        def lease() -> None:
            lease_id, _ = pool.lease(os.getpid())
            pool.confirm(lease_id)  # its one session is taken: the next needs room

        takers = [threading.Thread(target=lease) for _ in range(servers)]
        for taker in takers:
            taker.start()
        for taker in takers:
            taker.join()
        up_s = time.monotonic() - started
        assert len(pool.servers()) == servers, pool.servers()
        pids = descendants(os.getpid())
        cpu, rss, pss = cpu_rss_pss(pids)
    finally:
        pool.close()
    while descendants(os.getpid()):
        time.sleep(0.2)
    return Leg(forked, servers, up_s, cpu, len(pids), rss, pss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, nargs="+", default=[8, 32])
    args = parser.parse_args()
    bring_up(1, forked=False)  # the prepared environment, made once
    print(
        f"{'servers':>7} {'how':>7} {'up s':>6} {'CPU s':>6} {'CPU/server':>10} "
        f"{'procs':>5} {'RSS MB':>7} {'PSS MB':>7}"
    )
    for servers in args.servers:
        for forked in (False, True):
            leg = bring_up(servers, forked)
            how = "forked" if forked else "afresh"
            print(
                f"{leg.servers:>7} {how:>7} {leg.up_s:>6.1f} {leg.cpu_s:>6.1f} "
                f"{leg.cpu_s / leg.servers:>10.2f} {leg.processes:>5} "
                f"{leg.rss_mb:>7.0f} {leg.pss_mb:>7.0f}",
                flush=True,
            )
    print(f"load average: {os.getloadavg()[0]:.1f} (1 min)")


if __name__ == "__main__":
    main()
