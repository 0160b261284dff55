"""verifiers 0.2 runs a user simulator process per rollout; past the taskset's bound
(`max_simulators`) rollouts wait for one to end, and the eval says why and what to use
instead, rather than starting more than the machine holds."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.servers import BIN, eval_environ, model_flags, policy_server, read_traces


def simulators_of(eval_pid: int) -> int:
    """User simulator processes the eval `eval_pid` started (verifiers' subprocess
    runtime starts them as its children)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat[stat.rindex(")") + 2 :].split()[1])
        if parent == eval_pid and b"openenv_v1.vf02.user" in cmd:
            count += 1
    return count


def test_rollouts_past_the_simulator_bound_wait_their_turn_and_all_end_ok(
    wordle_url, tmp_path
):
    resets = ", ".join(f'{{"seed": {i}}}' for i in range(4))
    with policy_server("solver") as policy:
        proc = subprocess.Popen(
            [
                str(BIN / "eval"),
                *("openenv-v1", "--taskset.base-url", wordle_url),
                *("--taskset.resets", f"[{resets}]", "-c", "4"),
                *("--taskset.max-simulators", "2", "--taskset.simulator-starts", "1"),
                *model_flags(policy),
                *("--no-push", "--no-rich"),
            ],
            cwd=tmp_path,
            env=eval_environ(),
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "stderr.txt").open("w"),
        )
        most = 0
        try:
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                most = max(most, simulators_of(proc.pid))
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)
    stderr = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, stderr[-3000:]
    traces = read_traces(tmp_path)
    assert len(traces) == 4
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        assert trace["stop_condition"] == "openenv_done"
    # -c 4 asked for four at once; never more than two simulators lived together.
    assert 1 <= most <= 2, most
    # Said once, naming the bound and the ways past it (the console may wrap it).
    said = " ".join(stderr.split())
    assert said.count("this machine holds 2 at once") == 1, stderr[-3000:]
    for hint in ("--taskset.max-simulators", "verifiers 0.4", "vf-eval", "--server"):
        assert hint in said


async def test_a_slot_is_held_until_the_ended_rollouts_simulator_has_exited():
    """verifiers marks a rollout completed before its simulator has exited (it only
    signals it at teardown): the next rollout waits for that process to go."""
    import asyncio
    from dataclasses import dataclass, field

    from openenv_v1.vf02.simulator.slots import SimulatorSlots

    @dataclass
    class State:
        simulator_pid: int | None = None

    @dataclass
    class Trace:
        id: str
        is_completed: bool = False
        state: State = field(default_factory=State)

    simulator = subprocess.Popen(["sleep", "60"])
    try:
        slots = SimulatorSlots(alive=1, starting=1)
        first, second = Trace("first"), Trace("second")
        await slots.enter(first)
        first.state.simulator_pid = simulator.pid
        slots.started(first)
        waiting = asyncio.create_task(slots.enter(second))
        first.is_completed = True
        await asyncio.sleep(1.0)
        assert not waiting.done()
        assert slots.in_use() == (1, 0)
        simulator.terminate()
        simulator.wait(5)  # reaped: gone, not a zombie
        await asyncio.wait_for(waiting, 5)
        assert slots.in_use() == (1, 1)
    finally:
        simulator.kill()
        simulator.wait(5)
