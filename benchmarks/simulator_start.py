"""Benchmark: what one verifiers 0.2 user simulator costs to start, light and full.

    uv run python benchmarks/simulator_start.py [--repeats 3]

verifiers 0.2 starts `python -m openenv_v1.vf02.user` once per rollout. This starts
it the same way (`VF_CONFIG`, `MCP_PORT_FILE`, the rollout's `/state` and `/task`
channel, here served on loopback by this script), with a task that connects to a
local Wordle server, and measures the simulator process itself:

- `port`: from exec to writing its port file (what verifiers waits for, at most
  180 s): CPU seconds (user + system, from /proc) and wall seconds;
- `ready`: to answering HTTP on `/mcp` (verifiers' readiness probe), which is after
  `setup_task` (connect, reset); CPU and wall;
- `rss`: its resident memory once ready, in MB; then one `respond("")` through
  verifiers' own client, which must return the Wordle opening.

Three ways, in one run: `fork` (as shipped: a fork of the taskset's fork server,
`openenv_v1.vf02.simulator.forks`; the figures are the launcher's and its fork's
together, and the fork server's one-time cost is shown apart), `light` (a fresh
interpreter, where `openenv_v1.vf02.simulator.light_verifiers` hides anthropic, math_verify
and fastmcp) and `full` (`OPENENV_V1_FULL_IMPORT=1`, every module imported). Timings
are medians; they are inflated on a busy machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
WORDLE_APP = "wordle_env.server.app:app"
_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class SimulatorStart:
    mode: str
    port_cpu_s: float
    port_wall_s: float
    ready_cpu_s: float
    ready_wall_s: float
    rss_mb: float
    pss_mb: float
    """Its proportional share of memory (a fork shares pages with its server)."""
    opening: str
    """The text of the simulator's first user message (the env's opening)."""


@contextlib.contextmanager
def rollout_channel(task_json: str, seen: list[str] | None = None) -> Iterator[str]:
    """The rollout's `/state` + `/task` channel, as verifiers' interception serves it:
    yields the state URL. Each request's method and last path segment (`GET state`)
    is appended to `seen`, and the state last put is its last item's `PUT state
    <body>`."""
    state = {"body": b"{}"}
    seen = [] if seen is None else seen

    class Handler(BaseHTTPRequestHandler):
        def _send(self, body: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            seen.append(f"GET {self.path.rsplit('/', 1)[-1]}")
            if self.path.endswith("/task"):
                cls = "openenv_v1.vf02.user:OpenEnvData"
                self._send(json.dumps({"cls": cls, "task": task_json}).encode())
            else:
                self._send(state["body"])

        def do_PUT(self) -> None:
            state["body"] = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(f"PUT {self.path.rsplit('/', 1)[-1]} {state['body'].decode()}")
            self._send(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/rollout/state"
    finally:
        server.shutdown()
        server.server_close()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pss_mb(pid: int) -> float:
    """Proportional memory: a fork's pages shared with its fork server count in part."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _fork_pid(workdir: Path) -> int | None:
    """The fork's pid, from the launcher's log line (`fork` mode)."""
    with contextlib.suppress(FileNotFoundError):
        match = re.search(
            r"simulator forked as pid (\d+)", (workdir / "log").read_text()
        )
        if match:
            return int(match.group(1))
    return None


def start_simulator(
    env_url: str, *, mode: str, forks: Any = None, timeout_s: float = 300
) -> SimulatorStart:
    """Start one simulator as verifiers 0.2 does, for a task on `env_url` (a Wordle
    server), measure it, ask it for the opening, stop it. In `fork` mode the figures
    are the launcher's and its fork's together."""
    from verifiers.v1.mcp.launch import user_respond

    from openenv_v1.vf02.config import OpenEnvUserConfig
    from openenv_v1.vf02.simulator.light_verifiers import FULL_IMPORT_VAR
    from openenv_v1.vf02.user import OpenEnvData

    task = OpenEnvData(
        idx=0, name="bench", prompt=None, env=None, base_url=env_url,
        use_docker=False, reset={"seed": 1},
    )  # fmt: skip
    workdir = Path(tempfile.mkdtemp(prefix="openenv-sim-start-"))
    port_file = workdir / "port"
    with rollout_channel(task.model_dump_json()) as state_url:
        env = {k: v for k, v in os.environ.items() if k != FULL_IMPORT_VAR}
        env.update(
            VF_CONFIG=OpenEnvUserConfig(
                simulator_forks=forks.socket_path if forks else None,
                simulator_forks_token=forks.token if forks else None,
            ).model_dump_json(),
            MCP_PORT_FILE=str(port_file),
            VF_STATE_URL=state_url,
            VF_STATE_SECRET="bench",
            TMPDIR=str(workdir),
        )
        if mode == "full":
            env[FULL_IMPORT_VAR] = "1"
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv_v1.vf02.user"],
            env=env,
            cwd=workdir,
            stdout=(workdir / "log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        pids = [proc.pid]

        def cpu() -> float:
            if forks and len(pids) == 1 and (fork := _fork_pid(workdir)):
                pids.append(fork)
            return sum(_cpu_s(pid) for pid in pids)

        try:
            port_cpu = port_wall = None
            while port_cpu is None:
                _alive(proc, workdir, started, timeout_s)
                if port_file.exists() and port_file.read_text().strip().isdigit():
                    port_cpu = cpu()
                    port_wall = time.monotonic() - started
                time.sleep(0.005)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
            while True:
                _alive(proc, workdir, started, timeout_s)
                with contextlib.suppress(httpx.TransportError):
                    httpx.get(url, timeout=2)
                    break
                time.sleep(0.01)
            ready_cpu, ready_wall = cpu(), time.monotonic() - started
            rss = sum(_rss_mb(pid) for pid in pids)
            pss = sum(_pss_mb(pid) for pid in pids)
            messages = asyncio.run(user_respond(url, "", 0))
            opening = str(messages[0].content)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 15)
            proc.wait(10)
            shutil.rmtree(workdir, ignore_errors=True)
    if forks and len(pids) == 1:
        raise RuntimeError("fork mode, but the simulator was not forked")
    return SimulatorStart(
        mode=mode,
        port_cpu_s=port_cpu, port_wall_s=port_wall,  # type: ignore[arg-type]
        ready_cpu_s=ready_cpu, ready_wall_s=ready_wall, rss_mb=rss, pss_mb=pss,
        opening=opening,
    )  # fmt: skip


def _alive(
    proc: subprocess.Popen, workdir: Path, started: float, timeout_s: float
) -> None:
    if proc.poll() is not None:
        log = (workdir / "log").read_text(errors="replace")[-3000:]
        raise RuntimeError(f"the simulator exited with {proc.returncode}:\n{log}")
    if time.monotonic() - started > timeout_s:
        raise TimeoutError(f"the simulator was not ready within {timeout_s} s")


def median_start(
    env_url: str, *, mode: str, repeats: int, forks: Any = None
) -> SimulatorStart:
    """`repeats` starts one after another; the median of each figure."""
    runs = [start_simulator(env_url, mode=mode, forks=forks) for _ in range(repeats)]

    def med(field: str) -> float:
        return statistics.median(getattr(r, field) for r in runs)

    return SimulatorStart(
        mode=runs[0].mode,
        port_cpu_s=med("port_cpu_s"), port_wall_s=med("port_wall_s"),
        ready_cpu_s=med("ready_cpu_s"), ready_wall_s=med("ready_wall_s"),
        rss_mb=med("rss_mb"), pss_mb=med("pss_mb"), opening=runs[0].opening,
    )  # fmt: skip


def report(starts: list[SimulatorStart], server: SimulatorStart | None = None) -> str:
    lines = [
        f"{'simulator':<11}{'port cpu s':>11}{'port wall s':>12}{'ready cpu s':>12}"
        f"{'ready wall s':>13}{'rss MB':>8}{'pss MB':>8}"
    ]
    for s in starts:
        lines.append(
            f"{s.mode:<11}{s.port_cpu_s:>11.2f}{s.port_wall_s:>12.2f}"
            f"{s.ready_cpu_s:>12.2f}{s.ready_wall_s:>13.2f}{s.rss_mb:>8.0f}"
            f"{s.pss_mb:>8.0f}"
        )
    by_mode = {s.mode: s for s in starts}
    if {"light", "full"} <= by_mode.keys():
        light, full = by_mode["light"], by_mode["full"]
        lines.append(
            f"full / light: {full.ready_cpu_s / light.ready_cpu_s:.2f}x CPU to ready, "
            f"{full.rss_mb / light.rss_mb:.2f}x memory"
        )
    if server is not None:
        lines.append(
            f"fork server, once per eval process: {server.ready_cpu_s:.2f} s CPU "
            f"(imports and a first fork), {server.rss_mb:.0f} MB resident"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    with wordle_server() as url:
        print(report(*measure_starts(url, args.repeats)))


def measure_starts(
    url: str, repeats: int
) -> tuple[list[SimulatorStart], SimulatorStart]:
    """The three ways (`fork`, as shipped; `light`, a fresh interpreter without the
    unused packages; `full`), `repeats` starts each, and the fork server's one-time
    cost."""
    from openenv_v1.vf02.simulator.forks import SimulatorForks

    forks = SimulatorForks.start()
    try:
        server = fork_server_cost(url, forks)
        starts = [median_start(url, mode="fork", repeats=repeats, forks=forks)]
    finally:
        forks.close()
    starts += [median_start(url, mode=m, repeats=repeats) for m in ("light", "full")]
    return starts, server


def fork_server_cost(url: str, forks: Any) -> SimulatorStart:
    """The fork server's one-time cost: its CPU and memory once it has served a
    first (unmeasured) fork."""
    start_simulator(url, mode="fork", forks=forks)
    pid = forks._proc.pid
    return SimulatorStart(
        mode="fork server", port_cpu_s=0, port_wall_s=0, ready_cpu_s=_cpu_s(pid),
        ready_wall_s=0, rss_mb=_rss_mb(pid), pss_mb=_pss_mb(pid), opening="",
    )  # fmt: skip


@contextlib.contextmanager
def wordle_server() -> Iterator[str]:
    """The local Wordle env served by uvicorn on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "uvicorn", WORDLE_APP, "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the Wordle server exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the Wordle server did not come up")
            time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        proc.wait(10)


if __name__ == "__main__":
    main()
