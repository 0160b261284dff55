"""How many verifiers 0.2 user simulators one eval runs at once: the rest wait.

verifiers 0.2 runs a user simulator process per rollout, as many as the eval's `-c`,
a number that never reaches the taskset. So the gate is on our side of each rollout,
in the process that runs it (the eval, or each env-server worker):

- at most `starting` simulators start at once: a start is CPU-bound, and verifiers
  gives each only 180 s to report its port. A slot is taken in the task's `setup`
  and given back at the rollout's first stop check (the simulator is serving by
  then) or when the rollout ends;
- at most `alive` simulators exist at once, a bound on memory; past it rollouts wait
  in `setup`, and the eval says so once. A slot is given back once its rollout has
  ended *and* its simulator process has exited (one closing its env session still
  holds its memory).

    slots = SimulatorSlots(alive=32, starting=4)
    await slots.enter(trace)     # OpenEnvTask.setup
    slots.started(trace)         # the first stop check
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Protocol

from openenv_v1.core.launch.process_group import process_running

logger = logging.getLogger(__name__)

ROLLOUT_MB = 170
"""Memory one more rollout in flight takes on this host, at most: its simulator
(~95 MB proportional set once serving as a fork, ~100 MB as a fresh interpreter,
`benchmarks/simulator_start.py`) and its share of the rest (the null harness's
program, env server sessions). Measured without forks as the growth of the eval's
process tree from 32 to 64 rollouts in flight: 7.5 to 12.9 GB."""

ROLLOUTS_PER_CORE = 32
"""Simulators per core that held. Forked simulators (`simulator_forks`), on 2
cores under a load average of 10-30 from other work: `-c 256` with 60 alive at
most, and `-c 512`, ended 256/256 and 512/512. Fresh interpreters held 16 per core
(64 ended 48/64), which `fork_simulators = false` still gets."""

STARTS_PER_CORE = 8
"""Simulator starts per core at once. A forked start is ~0.7 s of CPU: 2 per core
ran `-c 256` at 1.3 episodes/s, 16 per core at 2.4, both all ok. A fresh
interpreter's start is ~3 s of CPU, and verifiers gives it 180 s to report its
port: those get 2 per core."""


EXIT_WAIT_S = 15.0
"""Longest a slot waits, once its rollout has ended, for the rollout's simulator to
exit (a launcher kills a fork still running 10 s after it was told to stop)."""


class _State(Protocol):
    simulator_pid: int | None


class _Trace(Protocol):
    id: str
    is_completed: bool
    state: _State


def default_alive(forked: bool = True) -> int:
    """Simulators this machine holds at once: `ROLLOUTS_PER_CORE` per core (half
    that for fresh interpreters), and no more than half its memory at `ROLLOUT_MB`
    each."""
    cores = os.cpu_count() or 1
    per_core = ROLLOUTS_PER_CORE if forked else ROLLOUTS_PER_CORE // 2
    try:
        total_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20
    except (ValueError, OSError):
        total_mb = 8192
    return max(4, min(per_core * cores, total_mb // 2 // ROLLOUT_MB))


def default_starting(forked: bool = True) -> int:
    """Simulator starts at once: `STARTS_PER_CORE` per core for forks, two per core
    for fresh interpreters (a start is CPU-bound)."""
    return max(2, (STARTS_PER_CORE if forked else 2) * (os.cpu_count() or 1))


def queue_message(alive: int) -> str:
    return (
        f"verifiers 0.2 runs a user simulator process per rollout, and this machine "
        f"holds {alive} at once (--taskset.max-simulators): further rollouts wait for "
        f"one to end. For more episodes in flight use verifiers 0.4 (`uv sync "
        f"--extra vf04`, then `vf-eval openenv-v1 ...`, or its env server as prime-rl "
        f"runs it), where an episode needs no process of its own; `eval --server` on "
        f"0.2 runs the same simulators in its workers, each worker bounded alike."
    )


@dataclass
class _Held:
    trace: _Trace
    starting: bool
    ended_at: float | None = None


class SimulatorSlots:
    """The two gates of one process (see the module docstring). Created outside any
    event loop; the semaphores are made on first use, in the loop that runs the
    rollouts."""

    def __init__(self, alive: int, starting: int) -> None:
        self.alive = alive
        self.starting = starting
        self._alive: asyncio.Semaphore | None = None
        self._starting: asyncio.Semaphore | None = None
        self._held: dict[str, _Held] = {}
        self._reaper: asyncio.Task[None] | None = None
        self._told = False

    async def enter(self, trace: _Trace) -> None:
        """Wait for a slot for this rollout's simulator (in the task's `setup`)."""
        if self._alive is None or self._starting is None:
            self._alive = asyncio.Semaphore(self.alive)
            self._starting = asyncio.Semaphore(self.starting)
        if self._alive.locked() and not self._told:
            self._told = True
            logger.warning(queue_message(self.alive))
        await self._alive.acquire()
        try:
            await self._starting.acquire()
        except BaseException:
            self._alive.release()
            raise
        self._held[trace.id] = _Held(trace, starting=True)
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.get_running_loop().create_task(self._reap())

    def started(self, trace: _Trace) -> None:
        """The rollout's simulator is serving: its start slot goes to the next."""
        held = self._held.get(trace.id)
        if held is not None and held.starting:
            held.starting = False
            assert self._starting is not None
            self._starting.release()

    def in_use(self) -> tuple[int, int]:
        """(simulators alive, simulators starting) that hold a slot."""
        return len(self._held), sum(h.starting for h in self._held.values())

    def _release(self, trace_id: str) -> None:
        held = self._held.pop(trace_id)
        assert self._alive is not None and self._starting is not None
        if held.starting:
            self._starting.release()
        self._alive.release()

    async def _reap(self) -> None:
        """Give back the slots of ended rollouts whose simulators have exited.
        verifiers marks every rollout's trace completed in its `finally` (success,
        error or cancellation) but calls no task hook after a failure, so this looks
        rather than waits to be told. A simulator that never replied left no pid:
        its slot goes when the rollout ends."""
        while self._held:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            for trace_id, held in list(self._held.items()):
                if not held.trace.is_completed:
                    continue
                if held.ended_at is None:
                    held.ended_at = now
                pid = held.trace.state.simulator_pid
                if (
                    pid is None
                    or not process_running(pid)
                    or now - held.ended_at > EXIT_WAIT_S
                ):
                    self._release(trace_id)
