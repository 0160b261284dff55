"""The processes of a benchmark leg: who they are, what they hold, what is left.

Reads `/proc` directly (no psutil): the leg's process tree, its env servers (this
checkout's Wordle env under uvicorn), their memory, open files and threads over time
(`Sampler`), the local policy the legs share, and the servers a leg left behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from openenv_v1.core.launch.process_group import die_with_owner

ROOT = Path(__file__).resolve().parent.parent.parent
WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Sample:
    episodes: int
    main_rss_mb: float
    main_fds: int
    main_threads: int
    servers_rss_mb: float
    servers_fds: int
    servers_threads: int
    servers: int


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_table() -> dict[int, tuple[int, str, int, int, int]]:
    """pid -> (parent pid, command line, rss bytes, threads, CPU ticks: user +
    system) of live processes."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] == "Z":
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            table[int(entry.name)] = (
                int(fields[1]),
                cmd,
                int(fields[21]) * PAGE,
                int(fields[17]),
                int(fields[11]) + int(fields[12]),
            )
    return table


def _descendants(root: int, table: dict[int, tuple]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = set(), [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            found.add(pid)
        stack += children.get(pid, [])
    return found


def tree_rss_mb(root: int) -> float:
    """Resident memory of `root` and all its live descendants, in MB."""
    table = _proc_table()
    return sum(table[pid][2] for pid in _descendants(root, table)) / 1e6


def _fds(pid: int) -> int:
    with contextlib.suppress(OSError):
        return len(os.listdir(f"/proc/{pid}/fd"))
    return 0


def is_env_server(cmd: str) -> bool:
    return WORDLE_APP in cmd and "uvicorn" in cmd


def wordle_servers_of_this_checkout() -> set[int]:
    """uvicorn processes serving this checkout's Wordle env (other checkouts' and
    other benchmarks' servers on the machine are not counted)."""
    pids = set()
    for pid, (_, cmd, *_) in _proc_table().items():
        if not is_env_server(cmd):
            continue
        with contextlib.suppress(OSError):
            cwd = os.readlink(f"/proc/{pid}/cwd")
            if str(WORDLE_PROJECT) in cmd or cwd.startswith(str(WORDLE_PROJECT)):
                pids.add(pid)
    return pids


class Sampler:
    """Samples the process tree under `root` every `every_s`: the main process (the
    eval or env server) and its env servers; `count()` says how many episodes are
    done at that moment."""

    def __init__(self, root: int, count, every_s: float = 0.5) -> None:
        self.root, self.count, self.every_s = root, count, every_s
        self.samples: list[Sample] = []
        self.peak_main = self.peak_servers = 0.0
        self.peak_simulators = 0
        """verifiers 0.2 user simulators alive at once (their launchers)."""
        self.server_pids: set[int] = set()
        self._ticks: dict[int, tuple[bool, int]] = {}
        """pid -> (an env server's, CPU ticks last seen) of every process sampled."""
        self.load = os.getloadavg()[0]
        """The 1-minute load average when the leg began, then its largest."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            table = _proc_table()
            tree = _descendants(self.root, table)
            servers = {p for p in tree if is_env_server(table[p][1])}
            server_trees = set().union(*(_descendants(p, table) for p in servers))
            self.server_pids |= servers
            main = tree - server_trees
            for pid in tree:
                self._ticks[pid] = (pid in server_trees, table[pid][4])
            self.load = max(self.load, os.getloadavg()[0])
            main_rss = sum(table[p][2] for p in main) / 1e6
            servers_rss = sum(table[p][2] for p in server_trees) / 1e6
            self.peak_main = max(self.peak_main, main_rss)
            simulators = sum("-m openenv_v1.vf02.user" in table[p][1] for p in main)
            self.peak_simulators = max(self.peak_simulators, simulators)
            self.peak_servers = max(self.peak_servers, servers_rss)
            self.samples.append(
                Sample(
                    episodes=self.count(),
                    main_rss_mb=main_rss,
                    main_fds=sum(_fds(p) for p in main),
                    main_threads=sum(table[p][3] for p in main),
                    servers_rss_mb=servers_rss,
                    servers_fds=sum(_fds(p) for p in server_trees),
                    servers_threads=sum(table[p][3] for p in server_trees),
                    servers=len(servers),
                )
            )

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds (user + system) of the leg's own processes and of its env
        servers, as last sampled (a process's last half second may be missed)."""
        tick = os.sysconf("SC_CLK_TCK")
        main = sum(t for server, t in self._ticks.values() if not server)
        servers = sum(t for server, t in self._ticks.values() if server)
        return main / tick, servers / tick

    def series(self, step: int = 100) -> list[Sample]:
        """The first sample at or past each multiple of `step` episodes."""
        picked, mark = [], step
        for sample in self.samples:
            if sample.episodes >= mark:
                picked.append(sample)
                mark = (sample.episodes // step + 1) * step
        return picked


@contextlib.contextmanager
def policy(port: int, python: Path) -> Iterator[str]:
    """The local scripted Wordle policy, stopped (its group) on exit."""
    proc = subprocess.Popen(
        [str(python), "-m", "openenv_v1.local_policy", "--mode", "solver"]
        + ["--port", str(port)],
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_owner,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the local policy did not start")
            time.sleep(0.1)
        yield url
    finally:
        stop_group(proc)


def stop_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def leftovers(before: set[int]) -> int:
    """This checkout's env servers still alive 5 s after a leg (then killed)."""
    time.sleep(5)
    left = wordle_servers_of_this_checkout() - before
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(left)


def close_leg(result, sampler: Sampler, before: set[int], workdir: Path):
    """A leg's result with what its `sampler` saw (peak memory, servers, the soak
    series) and the servers it left (killed); its `workdir` removed unless
    `SCALE_KEEP` is set."""
    result.peak_main_mb, result.peak_servers_mb = (
        sampler.peak_main,
        sampler.peak_servers,
    )
    result.servers = len(sampler.server_pids)
    result.series = sampler.series()
    result.cpu_main_s, result.cpu_servers_s = sampler.cpu_s()
    result.load = sampler.load
    if sampler.samples:
        result.peak_fds = max(s.main_fds + s.servers_fds for s in sampler.samples)
    result.left = leftovers(before)
    if not os.environ.get("SCALE_KEEP"):
        shutil.rmtree(workdir, ignore_errors=True)
    return result
