"""Every local endpoint the adapter opens answers only this eval's own processes:
the pool's lease endpoint, verifiers 0.2's simulator desk (native tool calls) and
simulator fork server. Another local user (`setpriv --reuid 65534`) cannot even
connect; a process of the same user without the token, or a browser-style
`text/plain` POST, is refused; idle connections hold no thread and are closed."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import threading
import time

import pytest

from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.local_http import LocalEndpoint, parse_address
from openenv_v1.vf02.simulator.forks import SimulatorForks
from tests.servers import wait_until
from tests.test_native import native_task
from tests.test_pool import wordle_target
from tests.tool_server import call_tool, native_servers

OTHER_USER = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
"""Run a command as `nobody` (needs root, as the suite runs in CI)."""
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not AS_ROOT and os.environ.get("CI") != "true",
    reason="running a command as another user (setpriv --reuid) needs root",
)


def curl(
    address: str,
    path: str,
    *,
    token: str | None = None,
    content_type: str = "application/json",
    body: str = "{}",
    other_user: bool = False,
) -> tuple[int, str]:
    """POST to the endpoint at `address` with curl; (curl's exit code, HTTP
    status). `token` None: the endpoint's own."""
    socket_path, own = parse_address(address)
    command = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}"]
    command += ["--max-time", "20", "--unix-socket", socket_path, "-X", "POST"]
    command += ["-H", f"Authorization: Bearer {own if token is None else token}"]
    command += ["-H", f"Content-Type: {content_type}", "--data", body]
    command.append(f"http://localhost/{path}")
    done = subprocess.run(
        [*OTHER_USER, *command] if other_user else command,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return done.returncode, done.stdout


def assert_answers_only_its_own(address: str, path: str, body: str) -> None:
    """Another user cannot connect even with the token (curl: "couldn't
    connect", exit 7; checked when the suite runs as root); without the token, or with a form's text/plain body, the
    request is refused; the same request done right is answered."""
    if AS_ROOT:
        assert curl(address, path, body=body, other_user=True) == (7, "000")
    assert curl(address, path, body=body, token="") == (0, "401")
    assert curl(address, path, body=body, token="guessed") == (0, "401")
    assert curl(address, path, body=body, content_type="text/plain") == (0, "415")
    assert curl(address, path, body="[1]") == (0, "400")
    assert curl(address, path, body=body) == (0, "200")


def idle_connections(path: str, count: int) -> list[socket.socket]:
    conns = []
    for _ in range(count):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(path)
        conns.append(conn)
    return conns


def closed_by_peer(conn: socket.socket) -> bool:
    conn.settimeout(0)
    try:
        return conn.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_the_lease_endpoint_answers_only_this_evals_processes_and_idle_connections_hold_no_thread():
    pool = ServerPool(wordle_target())
    try:
        address = pool.serve_http()
        assert_answers_only_its_own(address, "release", '{"lease": "none"}')
        threads = threading.active_count()
        conns = idle_connections(parse_address(address)[0], 1500)
        try:
            assert wait_until(lambda: pool._http.open_connections == 1500, 10)
            assert threading.active_count() <= threads + 2
            # Each must send its request within the endpoint's deadline (10 s).
            assert wait_until(lambda: all(map(closed_by_peer, conns)), 20)
        finally:
            for conn in conns:
                conn.close()
        assert curl(address, "release", body='{"lease": "none"}') == (0, "200")
    finally:
        pool.close()


async def test_connections_past_the_cap_are_closed_at_once_and_slow_requests_time_out():
    async def answer(path: str, body: dict) -> tuple[int, dict]:
        return 200, {"path": path}

    endpoint = LocalEndpoint(
        answer, name="test", max_connections=8, request_timeout_s=1
    )
    await endpoint.start()
    try:
        conns = await asyncio.to_thread(idle_connections, endpoint.socket_path, 8)
        late = await asyncio.to_thread(idle_connections, endpoint.socket_path, 1)
        for _ in range(50):
            if closed_by_peer(late[0]):
                break
            await asyncio.sleep(0.05)
        assert closed_by_peer(late[0])
        started = time.monotonic()
        while not all(map(closed_by_peer, conns)):
            await asyncio.sleep(0.05)
            assert time.monotonic() - started < 5
        for conn in conns + late:
            conn.close()
    finally:
        endpoint.close()


def test_the_simulator_desk_answers_only_its_own_processes(wordle_url, tmp_path):
    task = native_task(wordle_url, {"seed": 1})
    with native_servers(task, tmp_path) as (tools_url, _, chan):
        desk = chan.state.tool_desk
        assert desk is not None
        assert_answers_only_its_own(
            desk, "call", '{"name": "act", "arguments": {"message": "[crane]"}}'
        )
        # A forged state cannot point the tool server at another socket.
        chan.state.tool_desk = "unix:/var/run/docker.sock#x"
        text, failed = asyncio.run(call_tool(tools_url, "act", {"message": "[crane]"}))
        assert failed and "not a tool desk" in text


@needs_root
def test_another_user_cannot_connect_to_the_fork_server():
    forks = SimulatorForks.start()
    try:
        probe = (
            "import socket, sys; s = socket.socket(socket.AF_UNIX); "
            "s.connect(sys.argv[1])"
        )
        done = subprocess.run(
            [*OTHER_USER, "/usr/bin/python3", "-c", probe, forks.socket_path],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and "PermissionError" in done.stderr
        # This user can: the socket is there and listening.
        with contextlib.closing(socket.socket(socket.AF_UNIX)) as conn:
            conn.connect(forks.socket_path)
    finally:
        forks.close()
