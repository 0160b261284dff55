"""A lost env server at scale: what each SIGKILL of a live shared server costs.

    uv run python benchmarks/lost_server.py [--episodes 2048] [--in-flight 512]
        [--every 8] [--kills 5] [--line vf04|vf02]

Wordle episodes (envs/wordle, each solved on its last of four turns, 0.4 s of model
time before each) through the shared pool at its defaults, leased the way a verifiers
line's binding leases (`vf04`: in process; `vf02`: over the pool's loopback endpoint),
while one live server, the one holding the most episodes past their first model
turn, is SIGKILLed (its whole process group) every `--every` seconds, `--kills`
times. The episodes and their kill schedule are tests/test_burst.py's
(`test_a_killed_server_costs_no_episode`), at a size of one's choosing. Prints, per
kill, the sessions the server held and the episodes it cost; then the episodes that
failed before their first model turn (the goal: none), the episodes resumed by
replay and what the resumes cost (steps replayed, seconds) beside the model time
they saved, and the run's totals. `--no-resume` turns resuming off
(`EpisodeLimits.resume`), for the cost of a kill without it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openenv_v1.core import EnvTarget, EpisodeLimits
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.wordle_solver import _words
from tests.servers import WORDLE_APP, WORDLE_PROJECT
from tests.test_burst import (
    BEFORE_FIRST_TURN,
    THINK_S,
    Kill,
    Played,
    holding,
    kill_busiest,
    lost_to,
    play_with_think_time,
)


async def kill_every(
    pool: ServerPool, played: list[Played], every_s: float, kills: list[Kill], n: int
) -> None:
    while len(kills) < n:
        await asyncio.sleep(every_s)
        if any(holding(pool.servers(), played).values()):
            kills.append(kill_busiest(pool, played))


async def run(args: argparse.Namespace) -> None:
    target = EnvTarget(
        env="local/wordle",
        provider_kwargs={"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP},
        launch_timeout_s=300,
    )
    pool = ServerPool(target)
    try:
        if args.line == "vf04":
            rollout = EnvTarget(env=target.env, pool=pool.local())
        else:
            rollout = EnvTarget(env=target.env, pool_url=pool.serve_http())
        words = list(_words()[0])
        limits = EpisodeLimits(resume=not args.no_resume)
        played = [Played() for _ in range(args.episodes)]
        gate = asyncio.Semaphore(args.in_flight)

        async def one(i: int) -> None:
            async with gate:
                word, decoy = words[i % len(words)], words[(i + 1) % len(words)]
                await play_with_think_time(rollout, word, decoy, played[i], limits)

        started, kills = time.monotonic(), []
        killer = asyncio.create_task(
            kill_every(pool, played, args.every, kills, args.kills)
        )
        await asyncio.gather(*(one(i) for i in range(args.episodes)))
        wall = time.monotonic() - started
        killer.cancel()
        print_report(played, kills, started, wall, pool.launched())
    finally:
        pool.close()


def print_report(
    played: list[Played], kills: list[Kill], started: float, wall: float, servers: int
) -> None:
    cost = lost_to(kills, played)
    for n, kill in enumerate(kills, 1):
        print(
            f"kill {n} at {kill.at - started:5.1f}s: {kill.url} held "
            f"{len(kill.held)} episodes past their first turn; cost "
            f"{len(cost.get(kill.url or '', set()))}"
        )
    failed = [p for p in played if p.error]
    early = [p for p in failed if p.error.startswith(BEFORE_FIRST_TURN)]
    counted = set().union(*cost.values())
    others = [
        p
        for i, p in enumerate(played)
        if p.error and i not in counted and p not in early
    ]
    elsewhere = len(early) + len(others)
    resumes = [r for p in played for r in p.resumes]
    replayed = sum(r["replayed_steps"] for r in resumes)
    seconds = sum(r["seconds"] for r in resumes)
    print(
        f"resumed: {sum(1 for p in played if p.resumes)} episodes, {len(resumes)} "
        f"resumes, {replayed} steps replayed in {seconds:.1f}s (mean "
        f"{seconds / max(1, len(resumes)):.2f}s a resume); model time not spent "
        f"again: {replayed * THINK_S:.1f}s ({THINK_S}s a turn)"
    )
    print(
        f"{len(played)} episodes in {wall:.1f}s ({len(played) / wall:.1f}/s), "
        f"{servers} servers at the end: {len(failed)} failed ({len(early)} before "
        f"their first model turn, {elsewhere} not counted to a kill)"
    )
    killed = {k.url for k in kills}
    for p in early[:3] + others[:5]:
        on = "a killed server" if p.url in killed else "a live server"
        print(f"  e.g. (on {on}, {p.opened - started:.1f}s)", p.error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=2048)
    parser.add_argument("--in-flight", type=int, default=512)
    parser.add_argument("--every", type=float, default=8.0)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--line", choices=["vf04", "vf02"], default="vf04")
    parser.add_argument("--no-resume", action="store_true")
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
