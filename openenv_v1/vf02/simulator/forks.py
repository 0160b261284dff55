"""Start each verifiers 0.2 user simulator as a fork of one that has imported it all.

verifiers 0.2 runs `python -m openenv_v1.vf02.user` once per rollout, and a fresh
interpreter spends seconds of CPU importing verifiers, mcp's server, uvicorn and
OpenEnv's client before it serves. So the taskset starts one *fork server* per process
that runs rollouts (`SimulatorForks`), which imports all that once; each rollout's
simulator command then only asks it for a fork:

- the **launcher** is the process verifiers starts and owns (`python -m
  openenv_v1.vf02.user`). Before importing anything heavy it reads the fork server's
  socket from its config (`simulator_forks`), hands over its environment, working
  directory, arguments and standard streams, and waits. It forwards SIGTERM, SIGINT and
  SIGHUP to its fork (a fork left running past `STOP_GRACE_S` after that is killed),
  removes the port file verifiers gave the simulator (`MCP_PORT_FILE`, which
  verifiers leaves behind), and exits with the fork's exit code. It dies with the
  eval (a parent-death SIGTERM, passed on to its fork). With no fork server configured, or one that does
  not answer within `ANSWER_TIMEOUT_S`, it runs the simulator itself, as before.
- the **fork** takes over those streams, that environment and directory, and runs
  `OpenEnvUser.run()`. Its connection to the launcher is its lifeline: when the
  launcher is gone (SIGKILL included), it stops itself the same way. It also dies with
  the fork server (verifiers' own parent-death signal).
- the **fork server** exits within a second of its owner (the eval, or an `eval
  --server` worker) however that ends, and is stopped by `SimulatorForks.close()`.
  The taskset has it forked from the eval as it builds itself, while the eval has
  one thread (`reserve(fork_now=True)`, `prefork.py`): it waits there, holding the
  eval's imports, until the first rollout starts it. Where the process that builds
  the taskset runs threads already (an `eval --server` worker), the first rollout
  starts a fresh interpreter instead (~2 s of CPU importing).

The socket lives in a directory only this user can open, and the fork server
forks only for a launcher that brings its per-eval token (`simulator_forks_token` in
the config), which it got on its standard input (or its pipe from the eval), never
in its arguments or environment. It runs without the eval's credentials in its
environment (one forked from the eval holds them in memory, as the eval does) and
is non-dumpable (`server_env.hide_this_process`), as are its forks: code in an env
server, running as the same user, cannot read their state channel secrets.
Linux only (fork, passing file descriptors); elsewhere simulators start as before.

    forks = SimulatorForks.reserve(fork_now=True)   # the taskset: a socket path
    user = user.model_copy(update={"simulator_forks": forks.socket_path})
    await forks.started()                   # each rollout's setup (starts it once)
    forks.close()
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hmac
import importlib
import json
import os
import secrets
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from openenv_v1.core.launch.process_group import (
    die_with_owner,
    start_group,
    stop_group,
)
from openenv_v1.core.launch.server_env import without_credentials
from openenv_v1.vf02.simulator.prefork import Forked, Prefork, forkable_now

SIMULATOR_MODULE = "openenv_v1.vf02.user"
"""The module verifiers runs as each rollout's simulator (`python -m`): the fork server
imports it once, and each fork runs its `OpenEnvUser`. Named, not imported: the
binding imports this machinery, never the other way round."""
ANSWER_TIMEOUT_S = 60.0
"""Longest a launcher waits for its fork (the fork server may still be importing),
before it runs the simulator itself."""
STOP_GRACE_S = 10.0
"""How long a fork told to stop (or orphaned) may take to close its env session."""
BIND_TIMEOUT_S = 30.0
"""Longest `SimulatorForks.start()` waits for the fork server's socket."""
OWNER_POLL_S = 1.0
"""How often the fork server checks that its owner is alive."""
REQUEST_TIMEOUT_S = 5.0
"""Longest the fork server waits for a connected launcher's request (it serves one
connection at a time)."""
OWNER_VAR = "OPENENV_V1_SIMULATOR_OWNER"
"""Set by the process that runs rollouts to its pid, and so inherited by each
launcher verifiers starts there: a launcher with another parent was orphaned
before it could look, and leaves."""
_HEADER = struct.Struct("!I")
_MAX_REQUEST = 16 << 20
_STREAMS = 3  # stdin, stdout, stderr


def supported() -> bool:
    """Whether simulators can be forked on this platform."""
    return sys.platform.startswith("linux") and hasattr(socket, "send_fds")


# --- the eval's side: owning the fork server ---


@dataclass
class SimulatorForks:
    """The fork server of one process that runs rollouts, and its socket. The
    socket's path is chosen when the taskset is built (it goes into every
    simulator's config); the server starts with the first rollout."""

    socket_path: str
    _dir: str = field(repr=False)
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24), repr=False)
    """What a launcher must bring (the simulators' config carries it)."""
    _proc: subprocess.Popen[bytes] | Forked | None = field(default=None, repr=False)
    _ahead: Prefork | None = field(default=None, repr=False)
    """The fork server forked by `reserve(fork_now=True)`, until started."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def reserve(cls, *, fork_now: bool = False) -> SimulatorForks:
        """A socket path in a directory only this user can open. With `fork_now`,
        and when this process can be forked soundly now (`prefork.forkable_now`),
        the fork server is forked from it here, to wait for `ensure_started`;
        otherwise no process yet."""
        home = tempfile.mkdtemp(prefix="openenv-v1-forks-")
        if len(home) > 90:  # a unix socket path has room for ~107 bytes
            shutil.rmtree(home, ignore_errors=True)
            home = tempfile.mkdtemp(prefix="openenv-v1-forks-", dir="/tmp")
        forks = cls(os.path.join(home, "forks.sock"), home)
        if fork_now and supported() and forkable_now():
            forks._ahead = Prefork.fork(_serve_as_asked)
        atexit.register(forks.close)
        return forks

    @classmethod
    def start(cls) -> SimulatorForks:
        """`reserve()`, then the server started at once."""
        forks = cls.reserve()
        forks.ensure_started()
        return forks

    async def started(self) -> None:
        """`ensure_started()` from a rollout's setup, off the event loop the first
        time (a no-op afterwards). Marks this process as the owner of the
        launchers it starts from here on (`OWNER_VAR`)."""
        os.environ[OWNER_VAR] = str(os.getpid())
        if self._proc is None:
            await asyncio.to_thread(self.ensure_started)

    def ensure_started(self) -> None:
        """Start the fork server (once; later calls return at once) and wait until
        it listens (at most `BIND_TIMEOUT_S`); it imports in the background while
        launchers queue on its socket. The one `reserve` forked, if it did (and it
        is alive), is handed the socket, the token and the environment (this
        process's `without_credentials`); else a fresh interpreter gets them. Both
        lead a session of their own (its group holds the forks: `close()` ends
        all). Stopped by `close()`, at exit, or when this process dies."""
        with self._lock:
            if self._proc is not None:
                return
            env = without_credentials(os.environ)
            ahead, self._ahead = self._ahead, None
            proc: subprocess.Popen[bytes] | Forked | None = None
            if ahead is not None:
                path, owner = self.socket_path, os.getpid()
                proc = ahead.go(
                    {"socket": path, "owner": owner, "token": self.token, "env": env}
                )
            if proc is None:
                proc = self._start_fresh(env)
            # A launcher that finds no socket at all starts its simulator itself.
            deadline = time.monotonic() + BIND_TIMEOUT_S
            while not os.path.exists(self.socket_path) and proc.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            self._proc = proc

    def _start_fresh(self, env: dict[str, str]) -> subprocess.Popen[bytes]:
        # No parent-death signal: this runs on a worker thread, which ends long
        # before the eval; the fork server watches its owner's pid instead.
        proc = start_group(
            [sys.executable, "-m", "openenv_v1.vf02.simulator.forks"]
            + [self.socket_path, str(os.getpid())],
            stdin=subprocess.PIPE,
            env=env,
            owner_death=False,
        )
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.write(self.token.encode() + b"\n")
            proc.stdin.close()
        return proc

    def close(self) -> None:
        """Stop the fork server and every fork still running; remove the socket."""
        atexit.unregister(self.close)
        with self._lock:
            ahead, self._ahead = self._ahead, None
            if ahead is not None:
                ahead.discard()
            if self._proc is not None:
                # Its group holds the forks the server left behind: all go.
                stop_group(self._proc, grace_s=STOP_GRACE_S)
        shutil.rmtree(self._dir, ignore_errors=True)


# --- the launcher's side: what verifiers runs ---


def socket_from_config() -> tuple[str, str] | None:
    """The fork server's socket and token named in this simulator's config
    (`VF_CONFIG`)."""
    raw = os.environ.get("VF_CONFIG")
    if not raw or not supported():
        return None
    with contextlib.suppress(ValueError, AttributeError):
        config = json.loads(raw)
        path = config.get("simulator_forks")
        token = config.get("simulator_forks_token") or ""
        if isinstance(path, str) and path and isinstance(token, str):
            return path, token
    return None


_launcher: int | None = None
"""In a fork: the pid of its launcher."""


def simulator_pid() -> int:
    """The pid of the simulator process verifiers started and owns: the launcher of
    this fork, or this process when it runs the simulator itself. That process
    exits last (a launcher waits for its fork)."""
    return _launcher if _launcher is not None else os.getpid()


def run_forked() -> None:
    """Run this simulator as a fork of the configured fork server, and exit with its
    exit code. Returns (having done nothing) when there is no fork server to ask."""
    found = socket_from_config()
    if found is None:
        return
    path, token = found
    # Die with the eval from here on, as verifiers' own simulator does once it
    # serves: a launcher orphaned while it waits must not go on to start a
    # simulator itself (nothing would ever stop that one). One orphaned before this
    # line has another parent than the process that ran its rollout.
    owner = os.getppid()
    die_with_owner()
    expected = os.environ.get(OWNER_VAR)
    if os.getppid() != owner or (expected and expected != str(owner)):
        sys.exit(128 + signal.SIGTERM)
    try:
        lines, pid = _ask_for_fork(path, token)
    except (OSError, ValueError) as e:
        print(
            f"openenv-v1: no simulator fork ({type(e).__name__}: {e}); "
            "starting the simulator in this process",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"openenv-v1: simulator forked as pid {pid}", file=sys.stderr, flush=True)
    code = _relay(lines, pid)
    lines.close()
    _remove_port_file()
    sys.exit(code)


def _remove_port_file() -> None:
    """verifiers has each simulator report its port in a file of its own
    (`MCP_PORT_FILE`, `/tmp/vf-port-<uuid>`), reads it once, and never removes it:
    a file per rollout, left for as long as the machine runs (a trainer's evals
    leave millions). The launcher removes it once its simulator has ended (the port
    was read by then, or never will be)."""
    path = os.environ.get("MCP_PORT_FILE")
    if path:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _ask_for_fork(path: str, token: str) -> tuple[_Lines, int]:
    """Hand this process's streams and request to the fork server; returns the
    connection (as lines) and the fork's pid."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(ANSWER_TIMEOUT_S)
        conn.connect(path)
        request = json.dumps(
            {
                "environ": dict(os.environ),
                "cwd": os.getcwd(),
                "argv": sys.argv,
                "launcher": os.getpid(),
                "token": token,
            }
        ).encode()
        socket.send_fds(conn, [b"F"], list(range(_STREAMS)))
        conn.sendall(_HEADER.pack(len(request)) + request)
        lines = _Lines(conn)
        by = time.monotonic() + ANSWER_TIMEOUT_S
        answer = lines.next(lambda: by)
        if answer is None or "pid" not in answer:
            raise ValueError(
                (answer or {}).get("error", "the fork server closed the connection")
            )
        return lines, int(answer["pid"])
    except BaseException:
        conn.close()
        raise


class _Lines:
    """JSON lines from a socket it owns, read with a deadline (polling, so that
    signal handlers run and may move the deadline)."""

    def __init__(self, conn: socket.socket) -> None:
        self._conn = conn
        self._buffer = b""
        conn.settimeout(0.5)

    def next(self, deadline: Callable[[], float | None]) -> dict[str, Any] | None:
        """The next message; None when the peer hung up. `TimeoutError` once past
        `deadline()` (read on every poll; None: no deadline)."""
        while b"\n" not in self._buffer:
            try:
                chunk = self._conn.recv(4096)
            except TimeoutError:
                by = deadline()
                if by is not None and time.monotonic() > by:
                    raise
                continue
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        self._conn.close()


def _relay(lines: _Lines, pid: int) -> int:
    """Wait for the fork's exit code, passing stop signals on; a fork still running
    `STOP_GRACE_S` after a stop signal is killed. A fork that ends by the signal it
    was passed (uvicorn re-raises it once shut down) ends the launcher the same way."""
    stops: list[tuple[int, float]] = []  # (signal, deadline) of the first stop

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)
        if not stops:
            stops.append((signum, time.monotonic() + STOP_GRACE_S))

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:
        try:
            answer = lines.next(lambda: stops[0][1] if stops else None)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            return 128 + signal.SIGKILL
        except ValueError:
            continue
        if answer is None:  # the fork died without a word: by a signal
            if not stops:
                return 1
            signal.signal(stops[0][0], signal.SIG_DFL)
            _remove_port_file()
            os.kill(os.getpid(), stops[0][0])
            return 128 + stops[0][0]
        if "exit" in answer:
            return int(answer["exit"])


# --- the fork server ---


def _preload() -> None:
    """Import what every simulator imports, once."""
    from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules

    hide_unused_modules()
    import httpx  # noqa: F401
    import mcp.server.fastmcp
    import mcp.server.transport_security  # noqa: F401
    import uvicorn  # noqa: F401

    importlib.import_module(SIMULATOR_MODULE)  # verifiers.v1, the core
    from openenv_v1.core.light_import import generic_client_class

    generic_client_class()


def serve(path: str, owner: int, token: str | None = None) -> None:
    """The fork server's loop: one fork per connection that brings `token` (None:
    read from standard input), until its owner (the pid that started it) is gone.
    An owner that died before this process got here (a loaded machine can take
    seconds to start it) is gone already: it does not serve at all."""
    if os.getppid() != owner:
        return
    if token is None:
        token = sys.stdin.readline().strip()
    if not token:
        return
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1024)  # launchers queue here while the imports run
    _preload()
    import gc

    gc.freeze()  # forks share the imported objects' pages instead of copying them
    listener.settimeout(OWNER_POLL_S)
    try:
        while os.getppid() == owner:
            _reap_forks()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                _fork_one(listener, conn, token)
            except (OSError, ValueError) as e:
                print(f"openenv-v1 fork server: {e}", file=sys.stderr, flush=True)
            finally:
                conn.close()
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _serve_as_asked(message: dict[str, Any]) -> None:
    """The fork server `reserve(fork_now=True)` forked, once `ensure_started` asks:
    the environment it is given, then `serve`."""
    os.environ.clear()
    os.environ.update(message["env"])
    serve(message["socket"], message["owner"], message["token"])


def _reap_forks() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _fork_one(listener: socket.socket, conn: socket.socket, token: str) -> None:
    conn.settimeout(REQUEST_TIMEOUT_S)
    _, fds, _, _ = socket.recv_fds(conn, 1, _STREAMS)
    try:
        if len(fds) != _STREAMS:
            raise ValueError(f"expected {_STREAMS} streams, got {len(fds)}")
        (size,) = _HEADER.unpack(_read_exactly(conn, _HEADER.size))
        if size > _MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes")
        request = json.loads(_read_exactly(conn, size))
        if not isinstance(request, dict) or not hmac.compare_digest(
            str(request.get("token", "")).encode(), token.encode()
        ):
            _send(conn, {"error": "not authorized"})
            return
        if threading.active_count() > 1:
            # A fork copies only the forking thread; refuse rather than risk a lock
            # held by another one. The launcher then starts the simulator itself.
            _send(conn, {"error": "the fork server has threads; cannot fork safely"})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        if os.fork() == 0:
            listener.close()
            _run_fork(conn, fds, request)
    finally:
        for fd in fds:
            os.close(fd)


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ValueError("the launcher hung up mid-request")
        data += chunk
    return bytes(data)


def _send(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def _run_fork(conn: socket.socket, fds: list[int], request: dict[str, Any]) -> NoReturn:
    """In the fork: become the launcher's simulator, run it, report its exit code."""
    global _launcher
    code = 1
    try:
        _launcher = int(request["launcher"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.environ.clear()
        os.environ.update(request["environ"])
        os.chdir(request["cwd"])
        sys.argv = list(request["argv"])
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        tempfile.tempdir = None  # TMPDIR is the rollout's
        import random

        random.seed()
        conn.settimeout(None)
        _send(conn, {"pid": os.getpid()})
        threading.Thread(target=_lifeline, args=(conn,), daemon=True).start()
        importlib.import_module(SIMULATOR_MODULE).OpenEnvUser.run()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            _send(conn, {"exit": code})
        os._exit(code)


def _lifeline(conn: socket.socket) -> None:
    """Stop this fork when its launcher is gone: SIGTERM (the simulator closes its
    env session), then SIGKILL after `STOP_GRACE_S`."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGTERM)
    threading.Event().wait(STOP_GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    from openenv_v1.core.launch.server_env import hide_this_process

    hide_this_process()  # before the token is read; its forks stay hidden too
    serve(sys.argv[1], int(sys.argv[2]))
