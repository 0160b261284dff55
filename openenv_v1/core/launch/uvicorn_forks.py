"""A pool's UV servers forked from one template process per start (issue #50).

Each server of a `ServerPool` was a fresh `uvicorn APP` process that imported the
env's app and OpenEnv's server stack, ~2.5 s of CPU apiece: 80 CPU-s for 32 servers.
Servers of one pool whose start is the same (`ForkableStart`: the prepared
environment's Python, the app, the variables, the folder; one worker, no reload)
are forked instead from a template that imported the app once
(`uvicorn_template.py`, a stdlib-only script run by path in the env's environment):

- `UvicornForks` (one per pool, kept by its `plan.PoolShared`) holds a template per
  start, started on the calling thread (the pool's owner thread, which it dies
  with) when a server of that start is first asked for, and again if it died. Once
  a template refused (the app did not import, or importing it started a thread), or
  `TEMPLATE_STARTS` died before they were ready, those servers start as before;
- `UvicornTemplate` is one template: a fork on host:port writing to a given fd, and
  the exit code of a forked server;
- `ForkedServer` is a forked server as its launcher holds it, where it held a
  `subprocess.Popen` (`pid`, `poll`, `wait`, so `process_group.stop_group`): its
  exit is seen on a pidfd, and its code asked of the template that reaped it.

A forked server leads a session of its own and gets SIGTERM when its template dies;
the template gets SIGTERM when the pool's owner thread dies, and ends when the pool
closes. `OPENENV_V1_UV_FORKS=0` turns forking off (every server started as before),
to compare the two.

    forks = UvicornForks()
    template = forks.template(start, timeout_s=60)   # None: start it as before
    server = template.fork("127.0.0.1", 8000, output_fd) if template else None
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_v1.core.launch.process_group import start_group, stop_group
from openenv_v1.core.launch.uv_server import ServerOutput, ServerSpec

__all__ = [
    "FORKS_VAR",
    "UNKNOWN_CODE",
    "ForkableStart",
    "ForkedServer",
    "UvicornForks",
    "UvicornTemplate",
]

logger = logging.getLogger(__name__)

FORKS_VAR = "OPENENV_V1_UV_FORKS"
"""`0`: a pool's UV servers are not forked from a template (each starts afresh)."""
TEMPLATE_SCRIPT = Path(__file__).with_name("uvicorn_template.py")
UNKNOWN_CODE = -signal.SIGTERM
"""A forked server's exit code once its template, which reaped it, is gone: the
template's death sends it SIGTERM (as a `Popen` says a signal: negative)."""
TEMPLATE_STARTS = 3
"""Templates of one start that may die before they are ready (killed, or crashed
without a word) before its servers start afresh for the rest of the pool's life."""
_ANSWER_S = 10.0
"""How long a template may take to answer a fork or a code (a loaded host)."""
_STOP_GRACE_S = 5.0
_MESSAGE_BYTES = 65536


_UVICORN_OPTIONS = "UVICORN_"


@dataclass(frozen=True)
class ForkableStart:
    """What a template's servers share: the prepared environment's Python, the app,
    the variables, the folder."""

    python: Path
    app: str
    env: tuple[tuple[str, str], ...]
    cwd: Path

    @classmethod
    def of(
        cls, uvicorn: Path, spec: ServerSpec, env: Mapping[str, str], cwd: Path
    ) -> ForkableStart | None:
        """The start of a server `spec` run with the prepared environment's
        `uvicorn`; None when it is not forked (several workers, reload, forks off,
        or a `UVICORN_*` variable, an option uvicorn's command line reads and a
        template's `uvicorn.run` would not)."""
        if spec.workers != 1 or spec.reload or os.environ.get(FORKS_VAR) == "0":
            return None
        if any(name.startswith(_UVICORN_OPTIONS) for name in env):
            return None
        python = uvicorn.with_name("python")
        if not python.is_file():
            return None
        return cls(python, spec.app, tuple(sorted(env.items())), cwd)


class ForkedServer:
    """A server forked by a template, used as the `subprocess.Popen` of a server
    started afresh is. Thread-safe."""

    def __init__(self, pid: int, pidfd: int, template: UvicornTemplate) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self.template_pid = template.pid
        self._pidfd = pidfd
        self._template = template
        self._lock = threading.Lock()
        weakref.finalize(self, os.close, pidfd)

    def poll(self) -> int | None:
        """Its exit code once it exited (as `Popen.poll`), else None."""
        with self._lock:
            if self.returncode is None and _exited(self._pidfd, 0.0):
                self.returncode = self._template.exit_code(self.pid)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code, waiting up to `timeout`; `subprocess.TimeoutExpired` after."""
        code = self.poll()
        if code is None:
            if not _exited(self._pidfd, timeout):
                raise subprocess.TimeoutExpired(self._template.app, timeout or 0.0)
            code = self.poll()
        assert code is not None
        return code


def _exited(pidfd: int, timeout: float | None) -> bool:
    """Whether the process of `pidfd` exited, within `timeout` (None: waits)."""
    poller = select.poll()  # not select(): an eval's fds run past 1,024
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(None if timeout is None else timeout * 1000))


class UvicornTemplate:
    """One template process (`uvicorn_template.py`) and the requests it answers."""

    def __init__(
        self,
        app: str,
        process: subprocess.Popen[bytes],
        control: socket.socket,
        output: ServerOutput,
    ) -> None:
        self.app = app
        self._process = process
        self._control = control
        self._output = output
        self._lock = threading.Lock()
        self._lost = False

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def launch(cls, start: ForkableStart) -> UvicornTemplate:
        """Start the template of `start` (on the thread it should die with);
        `OSError` when it cannot run. `ready` says when it may fork."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        output = ServerOutput.open()
        fd = theirs.fileno()
        command = [str(start.python), str(TEMPLATE_SCRIPT), start.app, str(fd)]
        try:
            process = start_group(
                command,
                env=dict(start.env),
                cwd=start.cwd,
                stdout=output.fd,
                stderr=subprocess.STDOUT,
                pass_fds=(fd,),
            )
        except OSError:
            ours.close()
            output.close()
            raise
        finally:
            theirs.close()
            output.close_writer()
        return cls(start.app, process, ours, output)

    def ready(self, timeout_s: float) -> tuple[str | None, bool]:
        """Wait until it imported the app: (None, False), or why it will not fork
        and whether it said so itself (a refusal, not a death)."""
        with self._lock:
            answer, _ = self._receive(timeout_s)
        if answer is not None and answer.get("ready") is True:
            return None, False
        refusal = (answer or {}).get("refused")
        why = refusal or f"exited, or did not answer within {timeout_s:.0f}s"
        tail = self._output.tail(500)
        said = f"; its output ends with:\n{tail}" if tail else ""
        return f"{why}{said}", bool(refusal)

    def alive(self) -> bool:
        return not self._lost and self._process.poll() is None

    def fork(self, host: str, port: int, output_fd: int) -> ForkedServer | None:
        """A server on `host:port` writing to `output_fd`; None when the template
        did not fork one (it is gone)."""
        request = {"op": "fork", "host": host, "port": port}
        answer, fds = self._request(request, [output_fd])
        pid = (answer or {}).get("pid")
        if not isinstance(pid, int) or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        return ForkedServer(pid, fds[0], self)

    def exit_code(self, pid: int) -> int:
        """The exit code of its forked server `pid`, which exited."""
        answer, _ = self._request({"op": "code", "pid": pid})
        code = (answer or {}).get("code")
        return code if isinstance(code, int) else UNKNOWN_CODE

    def close(self) -> None:
        """End the template (its forked servers get SIGTERM); idempotent."""
        self._lost = True
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)
        stop_group(self._process, grace_s=_STOP_GRACE_S)
        with self._lock:
            self._control.close()
            self._output.close()

    def _request(
        self, message: dict[str, Any], fds: Sequence[int] = ()
    ) -> tuple[dict[str, Any] | None, list[int]]:
        with self._lock:
            if self._lost:
                return None, []
            try:
                socket.send_fds(self._control, [json.dumps(message).encode()], fds)
            except OSError:
                self._lost = True
                return None, []
            return self._receive(_ANSWER_S)

    def _receive(self, timeout_s: float) -> tuple[dict[str, Any] | None, list[int]]:
        """One answer and the fds it carries (lock held); None once it is gone."""
        try:
            self._control.settimeout(timeout_s)
            data, ancillary, _, _ = self._control.recvmsg(
                _MESSAGE_BYTES, socket.CMSG_SPACE(4), socket.MSG_CMSG_CLOEXEC
            )
        except OSError:  # timed out (a late answer would answer the next request)
            self._lost = True
            return None, []
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
        if not data:
            self._lost = True
            return None, list(fds)
        return json.loads(data), list(fds)


class UvicornForks:
    """A pool's templates, one per `ForkableStart` (the module docstring).
    Thread-safe; `close()` ends them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        """Held while a template starts: one start at a time."""
        self._templates: dict[ForkableStart, UvicornTemplate] = {}
        self._refused: set[ForkableStart] = set()
        self._lost_before_ready: dict[ForkableStart, int] = {}
        self._closed = False

    def template(
        self, start: ForkableStart, timeout_s: float
    ) -> UvicornTemplate | None:
        """The running template of `start`, started (on this thread, which it dies
        with) if there is none; None when this start is not forked: its template
        did not come up now, or refused before, or the pool closed."""
        with self._starting:
            with self._lock:
                if self._closed or start in self._refused:
                    return None
                old = self._templates.pop(start, None)
                if old is not None and old.alive():
                    self._templates[start] = old
                    return old
            if old is not None:
                old.close()
            return self._start(start, timeout_s)

    def _start(self, start: ForkableStart, timeout_s: float) -> UvicornTemplate | None:
        try:
            template = UvicornTemplate.launch(start)
        except OSError as e:
            template, why, refused = None, f"could not run: {e}", True
        else:
            with self._lock:
                self._templates[start] = template  # close() reaches it meanwhile
            why, refused = template.ready(timeout_s)
        if why is None:
            return template
        with self._lock:
            self._templates.pop(start, None)
            lost = self._lost_before_ready.get(start, 0) + 1
            self._lost_before_ready[start] = lost
            if refused or lost >= TEMPLATE_STARTS:
                self._refused.add(start)
            closed = self._closed
        if template is not None:
            template.close()
        if not closed:
            logger.info(
                "servers of %s start afresh, not forked from a template (%s)",
                start.app,
                why,
            )
        return None

    def close(self) -> None:
        """End every template; none starts after. Idempotent."""
        with self._lock:
            self._closed = True
            templates, self._templates = list(self._templates.values()), {}
        for template in templates:
            template.close()
