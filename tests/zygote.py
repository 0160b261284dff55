"""Evals, `openenv-v1` commands and env servers the tests run, each forked from a
process that has imported what it imports once.

A fresh `eval` (verifiers 0.2) or `vf-eval` (0.4) spends 5-6 s of CPU importing
verifiers (sympy for its math scorer, the Anthropic and OpenAI SDKs) before it reads
its first flag, the same for every eval; the 0.2 suite alone runs about 70, on 2 cores.
A fresh `openenv-v1 check` spends ~2 s importing the core and OpenEnv's client, for
~40 checks a suite; a test's own OpenEnv server (`python -m uvicorn`, gradio hidden)
~1.4 s importing OpenEnv's server, for ~60 a suite. So each test worker starts one
*zygote* per console script (and per `python -m` module and `PYTHON*` settings), which
imports the script's module and what a run of it imports once it runs (`_PRELOAD`),
and waits; `run` asks it for a fork that is the eval (or command) from there on:

- its arguments, environment (`os.environ`, hence every process it starts),
  working directory and standard streams are the test's; it runs the console script's
  `main` and exits through `sys.exit`, so the eval's atexit handlers run; its exit
  code (negative for a signal) is what `run` returns, with its output, as a
  `subprocess.CompletedProcess`;
- `run` kills it on timeout and raises `subprocess.TimeoutExpired`, as
  `subprocess.run` does;
- it dies with the zygote, the zygote with the test worker (parent-death signals);
- it runs the shipped code unchanged: nothing of the package or of verifiers is
  replaced in the zygote or in a fork (a verifiers 0.2 eval forks its simulator fork
  server as any user's does).

What differs from a fresh process: its parent is a small reaper the zygote forked
(the worker's grandchild), `/proc/PID/cmdline` and `environ` show the zygote's, and
what is read from the environment at import is read in the zygote (verifiers 0.2's
`VF_LOG_LEVEL`, which the fork applies again). An eval whose `PYTHONPATH` puts
folders in front of this process's (stand-in SDKs) forks too, those folders put in
front of its `sys.path` where Python puts them, unless one holds a module the zygote
has imported (it would not be the one imported): then the fork runs the command
itself (`exec`), as a fresh process. An eval whose environment changes a `PYTHON*`
variable otherwise runs as a fresh process; a server (`serve`) forks from a zygote
started with its `PYTHON*` settings.
Tests of how an eval ends (a signal, SIGKILL, a timeout) start it with `start` and
signal its pid; tests about what its own process shows (`/proc`, running as another
user) start it with `subprocess` themselves. `OPENENV_V1_TEST_FRESH_EVALS=1 uv run
pytest` starts every eval fresh.

    proc = run([str(BIN / "eval"), ...], cwd=tmp_path, env=environ, timeout=300)
    running = start([str(BIN / "eval"), ...], cwd=tmp_path, env=environ)
    running.send_signal(signal.SIGTERM)   # a test of how an eval ends
    server = serve([sys.executable, "-m", "uvicorn", app, ...], cwd=..., env=...)
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from openenv_v1.core.launch.process_group import die_with_owner

__all__ = ["Started", "run", "servable", "serve", "start"]

FRESH_VAR = "OPENENV_V1_TEST_FRESH_EVALS"
"""Set (to anything) in the test run's environment: every eval, command and server
starts fresh, as its own process (`docs/testing.md` says how)."""
_ENTRY_POINTS = {
    "eval": "verifiers.v1.cli.eval.main:main",
    "vf-eval": "verifiers.v1.cli.eval.main:main",
    "openenv-v1": "openenv_v1.cli:main",
}
_MODULES = {"uvicorn": "uvicorn.main:main"}
"""`python -m <module>` commands of this venv's Python that fork from a zygote."""
_PRELOAD = {
    "vf02": ("openenv_v1.vf02.taskset", "openenv_v1.vf02.user"),
    "vf04": ("openenv_v1.vf04.env", "openenv_v1.vf04.native"),
}
"""What an eval of this package imports once it runs, by verifiers line, besides
`_PRELOAD_EVALS` and `_PRELOAD_CORE`: ~1,000 modules, ~1 s of CPU per eval
(OpenEnv's client brings fastmcp, py-key-value and beartype; the binding brings
mcp's client and server), imported once in the zygote instead of in every fork.
None reads the environment or starts a thread as it loads (`_serve` checks the
thread)."""
_PRELOAD_CLI = (
    "openenv_v1.cli.check",
    "openenv_v1.cli.check_text",
    "openenv_v1.cli.demo",
)
"""What `openenv-v1` imports once it runs a command, besides `_PRELOAD_CORE` (its
command line itself imports only argparse and its own helpers; it never imports
verifiers)."""
_PRELOAD_CORE = (
    "openenv_v1.core.launch.pool",
    "openenv_v1.core.openenv_lines",
    "httpcore",
    "anyio._backends._asyncio",
)
_PRELOAD_EVALS = ("verifiers.v1.harnesses", "verifiers.v1.tasksets")
_PRELOAD_SERVER = (
    "openenv.core.env_server",
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
)
"""What a test's OpenEnv server imports before its app: OpenEnv's server (FastAPI,
mcp) and the uvicorn parts `uvicorn.Config.load` picks. Not the apps themselves: some
read their environment as they load."""
_zygotes: dict[tuple[str, ...], _Zygote] = {}
forked_cpu = 0.0
"""CPU seconds (user+sys) of the forked evals that ended so far, with what they
reaped: `RUSAGE_CHILDREN` of this process misses them (`tests/cpu_usage.py` adds
it)."""
_lock = threading.Lock()


def run(
    command: list[str], *, cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
    timeout=timeout)` for an `eval`/`vf-eval` of this venv, forked from its zygote
    (see the module docstring); as a fresh process when the zygote cannot run it."""
    zygote = _zygote_for(command, env)
    if zygote is None:
        return _fresh(command, cwd, env, timeout)
    return zygote.run(command, cwd, env, timeout)


def serve(command: list[str], *, cwd: Path | None, env: dict[str, str]) -> Started:
    """`subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)` for a
    `python -m uvicorn ...` of this venv's Python, forked from a zygote started with
    `env`'s `PYTHON*` settings: a server a test stops by its process group. Its
    standard streams are this process's."""
    key = _server_key(command, env)
    if key is None:
        raise ValueError(f"not a server a zygote forks: {command[:3]}")
    with _lock:
        zygote = _zygotes.get(key)
        if zygote is None or not zygote.alive():
            python = {n: v for n, v in env.items() if n.startswith("PYTHON")}
            zygote = _zygotes[key] = _Zygote(_MODULES[command[2]], python)
    return zygote.start(
        command, cwd or Path.cwd(), env, None, argv=command[2:], path0=str(cwd or "")
    )


def servable(command: list[str], env: dict[str, str]) -> bool:
    """Whether `serve` forks `command` (else it is to be started as it is)."""
    return _server_key(command, env) is not None


def _server_key(command: list[str], env: dict[str, str]) -> tuple[str, ...] | None:
    """The zygote `serve` forks `command` from (its module and `env`'s `PYTHON*`
    settings), or None: `command` is to be started as it is."""
    if os.environ.get(FRESH_VAR) or not _linux():
        return None
    if len(command) < 3 or command[:2] != [sys.executable, "-m"]:
        return None
    if command[2] not in _MODULES:
        return None
    python = sorted(f"{n}={v}" for n, v in env.items() if n.startswith("PYTHON"))
    return ("-m", command[2], *python)


def _linux() -> bool:
    return sys.platform.startswith("linux")


def start(
    command: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    output: int | BinaryIO | None = None,
) -> Started | subprocess.Popen[str]:
    """`subprocess.Popen(command, cwd=cwd, env=env, stdout=output, stderr=output,
    text=True)` for an `eval`/`vf-eval` of this venv, forked from its zygote: an
    eval a test signals, waits for or polls. `output` is `subprocess.DEVNULL`
    (None: the same), `subprocess.PIPE` (`.stdout` and `.stderr` to read) or a file
    open for writing (both streams go there). As a fresh process when the zygote
    cannot run it."""
    output = subprocess.DEVNULL if output is None else output
    if isinstance(output, int) and output not in (subprocess.DEVNULL, subprocess.PIPE):
        raise ValueError("output is subprocess.DEVNULL, subprocess.PIPE or a file")
    zygote = _zygote_for(command, env)
    if zygote is None:
        return subprocess.Popen(
            command, cwd=cwd, env=env, stdout=output, stderr=output, text=True
        )
    return zygote.start(command, cwd, env, output)


def _zygote_for(command: list[str], env: dict[str, str]) -> _Zygote | None:
    """The running zygote of `command`'s console script (started if need be), or
    None: the eval is to run fresh."""
    script = Path(command[0])
    if os.environ.get(FRESH_VAR) or not _forkable(script, env):
        return None
    with _lock:
        zygote = _zygotes.get((script.name,))
        if zygote is None or not zygote.alive():
            zygote = _zygotes[(script.name,)] = _Zygote(_ENTRY_POINTS[script.name])
    return zygote


def _forkable(script: Path, env: dict[str, str]) -> bool:
    if script.name not in _ENTRY_POINTS or script.parent != Path(sys.executable).parent:
        return False
    if not _linux():
        return False
    names = {n for n in [*env, *os.environ] if n.startswith("PYTHON")} - {"PYTHONPATH"}
    same = all(env.get(n) == os.environ.get(n) for n in names)
    return same and _path_prepended(env) is not None


def _path_prepended(env: dict[str, str]) -> list[str] | None:
    """The folders `env`'s `PYTHONPATH` puts in front of this process's (none when
    they are the same), or None when it is not this process's with folders in front."""
    ours = os.environ.get("PYTHONPATH", "")
    theirs = env.get("PYTHONPATH", "")
    if theirs == ours:
        return []
    tail = os.pathsep + ours if ours else ""
    if not theirs.endswith(tail):
        return None
    return theirs[: len(theirs) - len(tail)].split(os.pathsep)


def _fresh(
    command: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


class _Zygote:
    """The test side of one zygote process."""

    def __init__(self, entry_point: str, python: dict[str, str] | None = None) -> None:
        """A zygote for `entry_point`; with `python`, those are its `PYTHON*`
        settings instead of this process's."""
        self.socket_path = Path(tempfile.mkdtemp(prefix="openenv-v1-zygote-")) / "s"
        env = None
        if python is not None:
            env = {n: v for n, v in os.environ.items() if not n.startswith("PYTHON")}
            env.update(python)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, entry_point, str(self.socket_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            env=env,
        )
        ready = self.proc.stdout.readline() if self.proc.stdout else b""
        if ready.strip() != b"ready":
            self.proc.kill()
            raise RuntimeError(f"the {entry_point} zygote did not start: {ready!r}")
        atexit.register(self.close)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(
        self, command: list[str], cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """The eval forked, its output read and its end waited for; killed (and
        `subprocess.TimeoutExpired` raised, with its output) past `timeout`."""
        started = self.start(command, cwd, env, subprocess.PIPE)
        streams = {"stdout": started.stdout, "stderr": started.stderr}
        output: dict[str, str] = {}

        def read(name: str) -> None:
            with streams[name] as stream:  # type: ignore[union-attr]
                output[name] = stream.read()

        readers = [
            threading.Thread(target=read, args=(name,), daemon=True) for name in streams
        ]
        for reader in readers:
            reader.start()
        try:
            code = started.wait(timeout)
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()
            timed_out = True
        else:
            timed_out = False
        for reader in readers:
            reader.join()
        stdout, stderr = output["stdout"], output["stderr"]
        if timed_out:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, code, stdout, stderr)

    def start(
        self,
        command: list[str],
        cwd: Path,
        env: dict[str, str],
        output: int | BinaryIO | None,
        *,
        argv: list[str] | None = None,
        path0: str | None = None,
    ) -> Started:
        """The eval forked, not waited for (`Started`). `output`: `subprocess.PIPE`,
        `subprocess.DEVNULL`, a file open for writing, or None for this process's own
        streams (and then a session of its own, as a server's). `argv` and `path0`
        (its `sys.argv` and `sys.path[0]`): `command`'s and the console script's
        folder by default."""
        ends: list[int] = []
        if output == subprocess.PIPE:
            (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
            ends = [out_w, err_w]
        request = json.dumps(
            {
                "argv": command if argv is None else argv,
                "path0": str(Path(command[0]).parent) if path0 is None else path0,
                # A server's `PYTHON*` settings are its zygote's own.
                "prepend": [] if argv is not None else _path_prepended(env) or [],
                "session": output is None,
                "cwd": str(cwd),
                "env": env,
            }
        ).encode()
        conn = socket.socket(socket.AF_UNIX)
        with open(os.devnull, "r+b") as null:
            conn.connect(str(self.socket_path))
            if output is None:
                streams = [1, 2]
            elif not isinstance(output, int):
                streams = [output.fileno()] * 2
            else:
                streams = ends or [null.fileno()] * 2
            fds = [null.fileno(), *streams]
            socket.send_fds(conn, [request + b"\n"], fds)
        for fd in ends:
            os.close(fd)
        started = Started(command, conn)
        if ends:
            started.stdout = open(out_r, encoding="utf-8", errors="replace")
            started.stderr = open(err_r, encoding="utf-8", errors="replace")
        return started

    def close(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.socket_path.unlink(missing_ok=True)
        with_dir = self.socket_path.parent
        if with_dir.exists():
            with_dir.rmdir()


class Started:
    """An eval (command, server) forked by a zygote and running: what tests use of
    `subprocess.Popen` (`pid`, `poll`, `wait`, `send_signal`, `terminate`, `kill`,
    `returncode`, `stdout`/`stderr` when piped). Its exit code is what its reaper
    reports, negative for a signal, as `Popen` gives it."""

    stdout: TextIO | None = None
    stderr: TextIO | None = None

    def __init__(self, command: list[str], conn: socket.socket) -> None:
        self.args = command
        self._conn = conn
        self._lines = _Lines(conn)
        self.pid = int(self._lines.next())
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._conn.settimeout(0.0)
            try:
                self._ended(self._lines.next())
            except (BlockingIOError, TimeoutError):
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                self._ended(self._lines.next())
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0) from None
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            _kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _ended(self, line: str) -> None:
        global forked_cpu
        code, cpu = line.split()
        self.returncode = int(code)
        forked_cpu += float(cpu)
        self._conn.close()


class _Lines:
    """Lines read off a socket, a timeout leaving what was read intact."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.buffer = conn, b""

    def next(self) -> str:
        while b"\n" not in self.buffer:
            chunk = self.conn.recv(4096)
            if not chunk:
                raise RuntimeError("the zygote closed the connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


def _kill(pid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


# The zygote process.


def _serve(entry_point: str, socket_path: str) -> None:
    die_with_owner()
    parent = os.getppid()
    module, _, name = entry_point.partition(":")
    main = getattr(importlib.import_module(module), name)
    from openenv_v1 import verifiers_line

    if module == "openenv_v1.cli":
        preload = (*_PRELOAD_CLI, *_PRELOAD_CORE)
    elif module == "uvicorn.main":
        preload = _PRELOAD_SERVER
    else:
        preload = (*_PRELOAD[verifiers_line()], *_PRELOAD_EVALS, *_PRELOAD_CORE)
    for preloaded in preload:
        importlib.import_module(preloaded)
    if threading.active_count() != 1:  # a fork keeps only the thread that forks
        raise RuntimeError(f"the zygote runs threads: {threading.enumerate()}")
    if os.getppid() != parent:  # the worker died while this imported
        sys.exit(0)
    # Out of the collector's reach: an eval's full collections would otherwise walk
    # (and so copy) every object imported here, ~0.6 s of CPU per fork.
    gc.freeze()
    # The reapers are waited for, here and when this stops, so that the evals' CPU
    # reaches the worker's `RUSAGE_CHILDREN` (the CI's figures count it).
    signal.signal(signal.SIGTERM, _stop)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(socket_path)
    listener.listen(64)
    listener.settimeout(1.0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        _reap_reapers(block=False)
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        pid = os.fork()
        if pid == 0:
            listener.close()
            _reap(conn, main)
        _reapers.add(pid)
        conn.close()


_reapers: set[int] = set()


def _reap_reapers(block: bool) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reapers.discard(pid)


def _stop(signum: int, frame: Any) -> None:
    """Stop the reapers of evals still running (each eval gets its parent-death
    SIGTERM), wait for all, exit."""
    for pid in _reapers:
        _kill(pid, signal.SIGTERM)
    _reap_reapers(block=True)
    os._exit(0)


def _reap(conn: socket.socket, main: Any) -> None:
    """The reaper: forks the eval, tells its pid, then its exit code."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_owner()
    message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while not message.endswith(b"\n"):
        message += conn.recv(1 << 20)
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _eval(request, fds, main)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    conn.sendall(f"{os.waitstatus_to_exitcode(status)} {cpu:.3f}\n".encode())
    os._exit(0)


def _eval(request: dict[str, Any], fds: list[int], main: Any) -> None:
    die_with_owner()
    if request["session"]:
        os.setsid()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None
    prepend = request["prepend"]
    if any(name in sys.modules for name in _top_level_modules(prepend)):
        argv = request["argv"]  # an eval's: its whole command
        os.execv(argv[0], argv)  # a fresh process, as the test would start it
    sys.argv = list(request["argv"])
    sys.path[0] = request["path0"]
    sys.path[1:1] = prepend  # where Python puts PYTHONPATH's folders
    verifiers = sys.modules.get("verifiers")
    if hasattr(verifiers, "setup_logging"):
        verifiers.setup_logging(os.getenv("VF_LOG_LEVEL"))
    sys.exit(main())


def _top_level_modules(folders: list[str]) -> set[str]:
    """The names of the top-level modules and packages in `folders`."""
    names = set()
    for folder in folders:
        try:
            entries = os.listdir(folder or ".")
        except OSError:
            continue
        for entry in entries:
            stem = entry.partition(".")[0]
            if entry.endswith((".py", ".so", ".pyd")) or "." not in entry:
                names.add(stem)
    return names


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
