"""verifiers 0.2 user simulators started as forks of the taskset's fork server
(`openenv_v1.vf02.simulator.forks`): they play, and no fork outlives its launcher
(SIGTERM or SIGKILL), its fork server's owner, or `close()`.

Each simulator here is started as verifiers starts it (`python -m
openenv_v1.vf02.user` in its own process group, with `VF_CONFIG`, `MCP_PORT_FILE` and
the rollout's `/task` channel). The evals of the other 0.2 tests all run through forks
too (the taskset starts a fork server by default)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from verifiers.v1.mcp.launch import user_respond

from benchmarks.simulator_start import rollout_channel
from openenv_v1.core.launch.process_group import process_running
from openenv_v1.vf02.config import OpenEnvUserConfig
from openenv_v1.vf02.simulator.forks import OWNER_VAR, STOP_GRACE_S, SimulatorForks
from openenv_v1.vf02.user import OpenEnvData
from tests.servers import wait_until


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


class Simulator:
    """One launched simulator: its launcher process, log and port file."""

    def __init__(
        self, proc: subprocess.Popen[bytes], workdir: Path, channel: list[str]
    ) -> None:
        self.proc, self.workdir = proc, workdir
        self.channel = channel
        """The requests it made on its rollout channel (`rollout_channel`)."""

    def log(self) -> str:
        return (self.workdir / "log").read_text(errors="replace")

    def url(self) -> str:
        port_file = self.workdir / "port"

        def reported() -> bool:
            assert self.proc.poll() is None, self.log()
            return port_file.exists() and port_file.read_text().strip().isdigit()

        assert wait_until(reported, 120), self.log()
        url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"

        def serving() -> bool:  # after setup_task, as verifiers' probe waits for
            assert self.proc.poll() is None, self.log()
            try:
                http.get(url)
            except httpx.TransportError:
                return False
            return True

        with httpx.Client(timeout=2, trust_env=False) as http:  # one for every poll
            assert wait_until(serving, 120, interval=0.05), self.log()
        return url

    def opening(self) -> str:
        messages = asyncio.run(user_respond(self.url(), "", 0))
        return str(messages[0].content)

    def fork_pid(self) -> int:
        match = re.search(r"simulator forked as pid (\d+)", self.log())
        assert match, self.log()
        return int(match.group(1))


@contextlib.contextmanager
def simulator(
    env_url: str, tmp_path: Path, forks_socket: str | None, token: str | None = None
) -> Iterator[Simulator]:
    task = OpenEnvData(
        idx=0, name="forks", prompt=None, env=None, base_url=env_url,
        use_docker=False, reset={"seed": 1},
    )  # fmt: skip
    workdir = tmp_path / "rollout"
    workdir.mkdir(parents=True)
    channel: list[str] = []
    with rollout_channel(task.model_dump_json(), channel) as state_url:
        env = dict(os.environ)
        env.update(
            VF_CONFIG=OpenEnvUserConfig(
                simulator_forks=forks_socket, simulator_forks_token=token
            ).model_dump_json(),
            MCP_PORT_FILE=str(workdir / "port"),
            VF_STATE_URL=state_url,
            VF_STATE_SECRET="forks",
            TMPDIR=str(workdir),
        )
        with (workdir / "log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "openenv_v1.vf02.user"],
                env=env,
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # as verifiers' subprocess runtime does
            )
        try:
            yield Simulator(proc, workdir, channel)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def forks() -> Iterator[SimulatorForks]:
    forks = SimulatorForks.start()
    yield forks
    forks.close()


def test_a_forked_simulator_plays_and_ends_with_its_launcher(
    wordle_url, tmp_path, forks
):
    with simulator(wordle_url, tmp_path, forks.socket_path, forks.token) as sim:
        assert "wordle" in sim.opening().lower()
        fork = sim.fork_pid()
        # The simulator is the fork server's child, not a fresh interpreter.
        assert _ppid(fork) == forks._proc.pid
        # verifiers stops a simulator with SIGTERM to its launcher's group: the fork
        # gets it, closes its env session and ends as an unforked simulator does
        # (uvicorn re-raises the SIGTERM once shut down), and so does the launcher.
        os.killpg(sim.proc.pid, signal.SIGTERM)
        assert sim.proc.wait(STOP_GRACE_S + 5) == -signal.SIGTERM, sim.log()
        assert wait_until(lambda: not process_running(fork), 5)
    # The port file verifiers had it report in (and never removes) went with it.
    assert not (sim.workdir / "port").exists()


def test_in_text_mode_a_simulator_pulls_the_rollout_state_once(
    wordle_url, tmp_path, forks
):
    with simulator(wordle_url, tmp_path, forks.socket_path, forks.token) as sim:
        url = sim.url()

        async def play() -> None:
            for seq, guess in enumerate(["", "[crane]", "[pious]"]):
                await user_respond(url, guess, seq)

        asyncio.run(play())
    # Before its first turn only: nothing else writes the state in text mode, so it
    # goes on from what it pushed; every turn still pushes the account.
    assert [r for r in sim.channel if r.startswith("GET state")] == ["GET state"]
    pushed = [r for r in sim.channel if r.startswith("PUT state")]
    assert len(pushed) == 3
    account = json.loads(pushed[-1].split(" ", 2)[2])["account"]
    assert account["steps"] == 2


def test_a_fork_ends_when_its_launcher_is_killed(wordle_url, tmp_path, forks):
    with simulator(wordle_url, tmp_path, forks.socket_path, forks.token) as sim:
        sim.url()
        fork = sim.fork_pid()
        os.killpg(sim.proc.pid, signal.SIGKILL)
        sim.proc.wait(5)
        # Its lifeline to the launcher breaks: SIGTERM at once, SIGKILL at the latest
        # after the grace.
        assert wait_until(lambda: not process_running(fork), STOP_GRACE_S + 5)
        # The fork server goes on serving the next rollout.
    with simulator(
        wordle_url, tmp_path / "next", forks.socket_path, forks.token
    ) as sim:
        assert "wordle" in sim.opening().lower()
        assert sim.fork_pid() != fork


def test_close_ends_the_fork_server_and_its_forks(wordle_url, tmp_path):
    forks = SimulatorForks.start()
    with simulator(wordle_url, tmp_path, forks.socket_path, forks.token) as sim:
        sim.url()
        fork = sim.fork_pid()
        forks.close()
        assert forks._proc.poll() is not None
        assert wait_until(lambda: not process_running(fork), 5)
        assert not Path(forks.socket_path).parent.exists()
        # The launcher sees its fork go and exits too.
        assert sim.proc.wait(10) != 0


OWNER = """
    import atexit, os, signal, sys, time
    from openenv_v1.vf02.simulator.forks import SimulatorForks
    marker = sys.argv[1]
    # What the fork server and its forks must not run.
    atexit.register(lambda: open(marker, "a").write(f"{os.getpid()}\\n"))
    signal.signal(signal.SIGTERM, lambda *_: None)
    forks = SimulatorForks.start()
    print(forks.socket_path, forks._proc.pid, forks.token, flush=True)
    if sys.stdin.readline():
        forks.close()
        print("closed", forks._proc.returncode, flush=True)
    os._exit(0)
"""


@contextlib.contextmanager
def owner(marker: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """A process that owns a fork server: the process and its line (socket, fork
    server pid, token). A line on its stdin makes it `close()` the fork server."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(OWNER), str(marker)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc, proc.stdout.readline().split()
    finally:
        proc.kill()
        proc.wait(5)


def test_the_fork_server_and_its_forks_end_with_a_killed_owner(wordle_url, tmp_path):
    (tmp_path / "run").mkdir()
    with owner(tmp_path / "exit-handlers") as (proc, (socket_path, server, token)):
        with simulator(wordle_url, tmp_path / "run", socket_path, token) as sim:
            sim.url()
            fork = sim.fork_pid()
            proc.kill()  # SIGKILL: no atexit, no close()
            proc.wait(5)
            assert wait_until(lambda: not process_running(int(server)), 5)
            assert wait_until(lambda: not process_running(fork), 5)
            assert sim.proc.wait(10) != 0
    # The fork ran its exit handlers as it ended, and none was the owner's.
    assert not (tmp_path / "exit-handlers").exists()


def test_the_fork_server_is_its_owners_child_and_ends_by_close(wordle_url, tmp_path):
    """The fork server is the owner's child, in a session of its own, and runs none
    of the owner's exit or signal handlers: a fork's end runs none of the owner's,
    and the owner's SIGTERM handler ignores the signal, yet `close()`'s SIGTERM ends
    the server."""
    marker = tmp_path / "exit-handlers"
    with owner(marker) as (proc, (socket_path, server, token)):
        pid = int(server)
        assert _ppid(pid) == proc.pid
        assert os.getsid(pid) == pid
        with simulator(wordle_url, tmp_path / "run", socket_path, token) as sim:
            assert "wordle" in sim.opening().lower()
            fork = sim.fork_pid()
            assert _ppid(fork) == pid
            os.killpg(sim.proc.pid, signal.SIGTERM)
            assert sim.proc.wait(STOP_GRACE_S + 5) == -signal.SIGTERM, sim.log()
            assert wait_until(lambda: not process_running(fork), 5)
        # A fork that fails (its config does not validate) runs its exit handlers:
        # none of them the owner's (which would remove the socket's folder).
        config = {"simulator_forks": socket_path, "simulator_forks_token": token}
        failed = subprocess.run(
            [sys.executable, "-m", "openenv_v1.vf02.user"],
            env={**os.environ, "VF_CONFIG": json.dumps({**config, "max_turns": "x"})},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "simulator forked as pid" in failed.stderr
        assert failed.returncode != 0 and "max_turns" in failed.stderr
        assert Path(socket_path).exists()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("close\n")
        proc.stdin.flush()
        # Ended by close()'s SIGTERM, not by the SIGKILL after the grace.
        assert proc.stdout.readline().split() == ["closed", str(-signal.SIGTERM)]
        assert not process_running(pid)
        assert not Path(socket_path).parent.exists()
    assert not marker.exists()


def test_a_fork_server_whose_owner_died_before_it_started_never_serves(tmp_path):
    """The owner (the pid on its command line) was SIGKILLed while the server was
    still starting (seconds on a loaded machine): the server is an orphan already,
    so it leaves at once, before binding its socket."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    socket_path = tmp_path / "forks.sock"
    server = subprocess.run(
        [sys.executable, "-m", "openenv_v1.vf02.simulator.fork_server"]
        + [str(socket_path), str(gone.pid)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert server.returncode == 0, server.stderr
    assert not socket_path.exists()


def test_without_an_answering_fork_server_the_simulator_starts_itself(
    wordle_url, tmp_path
):
    missing = str(tmp_path / "gone" / "forks.sock")
    with simulator(wordle_url, tmp_path, missing) as sim:
        assert "wordle" in sim.opening().lower()
        assert "no simulator fork (FileNotFoundError" in sim.log()
        assert "forked as pid" not in sim.log()
        # What a forked simulator's launcher mirrors (the test above).
        os.killpg(sim.proc.pid, signal.SIGTERM)
        assert sim.proc.wait(STOP_GRACE_S + 5) == -signal.SIGTERM, sim.log()


ORPHAN_OWNER = """
    import os, subprocess, sys, time
    launcher = subprocess.Popen([sys.executable, "-m", "openenv_v1.vf02.user"])
    print(launcher.pid, flush=True)
    time.sleep(600)
"""


def test_a_launcher_orphaned_while_it_waits_starts_no_simulator(tmp_path):
    """The eval dies while a launcher waits for its fork: the launcher goes with it
    (it must not start a simulator of its own that nothing would stop)."""
    import socket

    path = str(tmp_path / "forks.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)  # connections queue, no fork ever comes
    config = OpenEnvUserConfig(simulator_forks=path).model_dump_json()
    owner = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(ORPHAN_OWNER)],
        env={**os.environ, "VF_CONFIG": config},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        launcher = int(owner.stdout.readline())
        conn, _ = listener.accept()  # the launcher has asked
        owner.kill()
        owner.wait(5)
        assert wait_until(lambda: not process_running(launcher), 5)
        conn.close()  # a launcher still there would now start a simulator itself
    finally:
        owner.kill()
        listener.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(launcher, signal.SIGKILL)


def test_a_launcher_orphaned_before_it_looked_starts_no_simulator(wordle_url, tmp_path):
    """The eval died before its launcher read its parent: the launcher's parent is
    then another process than the one that ran the rollout (`OWNER_VAR`), and it
    leaves at once, with no fork server to ask (the eval's went with it) and no
    simulator of its own."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    missing = str(tmp_path / "gone" / "forks.sock")
    with mock_owner(gone.pid), simulator(wordle_url, tmp_path, missing) as sim:
        assert sim.proc.wait(60) == 128 + signal.SIGTERM, sim.log()
        assert "no simulator fork" not in sim.log()
        assert not (sim.workdir / "port").exists()


@contextlib.contextmanager
def mock_owner(pid: int) -> Iterator[None]:
    """The process that ran the rollout, as the launcher reads it."""
    before = os.environ.get(OWNER_VAR)
    os.environ[OWNER_VAR] = str(pid)
    try:
        yield
    finally:
        if before is None:
            del os.environ[OWNER_VAR]
        else:
            os.environ[OWNER_VAR] = before


def test_a_launcher_without_the_evals_token_gets_no_fork(wordle_url, tmp_path, forks):
    """Another process of the same user that finds the socket cannot have a fork
    (which would run with the fork server's imports and memory): the fork server
    answers `not authorized`, and a launcher so refused starts its simulator
    itself."""
    with simulator(wordle_url, tmp_path, forks.socket_path, "not-the-token") as sim:
        assert "wordle" in sim.opening().lower()
        assert "no simulator fork (ValueError: not authorized)" in sim.log()
        assert "forked as pid" not in sim.log()
