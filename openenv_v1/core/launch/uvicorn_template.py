"""A template env server: imports the app once, then forks one uvicorn per request.

Run by path with the env's prepared Python, never imported by openenv_v1: the env's
environment does not have openenv_v1, so this imports only the stdlib, uvicorn and
the env's app (`uvicorn_forks` starts it and speaks to it).

    python uvicorn_template.py MODULE:ATTR CONTROL_FD

CONTROL_FD is one end of a `SOCK_SEQPACKET` socket pair; each message is a JSON
object. The template says `{"ready": true}` once the app is imported, or
`{"refused": why}` and exits: the import failed, or it started a thread (a fork
copies only the forking thread; a lock another thread held stays held forever).
Then, per request:

- `{"op": "fork", "host": H, "port": P}` with the server's output fd attached: a
  child that leads a session of its own, gets SIGTERM when the template dies, writes
  to that fd and runs uvicorn on the imported app (what `uvicorn M:A --host H --port
  P --workers 1` runs); answered `{"pid": N}` with a pidfd of the child attached;
- `{"op": "code", "pid": N}`: `{"code": C}`, the exit code of a child that exited
  (negative: the signal), or null while it runs.

Children are reaped as SIGCHLD arrives. The template exits when the socket closes;
its children then get their SIGTERM.
"""

import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import traceback

_PR_SET_PDEATHSIG = 1
_MESSAGE_BYTES = 65536


def send(control, message, fds=()):
    """Send one JSON message, with `fds` attached."""
    socket.send_fds(control, [json.dumps(message).encode()], list(fds))


def load_app(reference):
    """The object `MODULE:ATTR` names (as uvicorn's command line resolves it)."""
    module_name, _, attrs = reference.partition(":")
    if not module_name or not attrs:
        raise ImportError(f"app {reference!r} is not of the form MODULE:ATTR")
    value = importlib.import_module(module_name)
    for attr in attrs.split("."):
        value = getattr(value, attr)
    return value


def threads_running():
    """Threads of this process (the kernel's count: a C library's threads too)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        import threading

        return threading.active_count()


def prepare(control, reference):
    """The imported app, or None once the refusal was sent."""
    try:
        app = load_app(reference)
        os.pidfd_open  # noqa: B018  (Linux 5.3 and Python 3.9, or no forks)
    except BaseException as e:  # the app's import may raise anything
        traceback.print_exc()
        send(control, {"refused": f"the app did not import: {e!r}"[:2000]})
        return None
    threads = threads_running()
    if threads > 1:
        send(control, {"refused": f"importing the app started {threads - 1} thread(s)"})
        return None
    return app


class Children:
    """The forked servers, reaped as they exit, and their exit codes."""

    def __init__(self):
        self.codes = {}
        self.running = set()

    def reap(self):
        for pid in list(self.running):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done, status = pid, 255 << 8
            if done:
                self.running.discard(pid)
                self.codes[pid] = os.waitstatus_to_exitcode(status)


def serve_child(app, host, port, log_fd, template, control, wake_fds):
    """In a fresh child: its own session, dying with the template, output to
    `log_fd`, then uvicorn on `app`; never returns."""
    code = 1
    try:
        os.setsid()
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != template:  # the template died before the prctl
            os._exit(1)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        for fd in wake_fds:
            os.close(fd)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        numpy = sys.modules.get("numpy")
        if numpy is not None:  # the template's seed would repeat in every server
            numpy.random.seed()
        import uvicorn

        uvicorn.run(app, host=host, port=port, workers=1)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def fork_server(control, wake_fds, app, request, fds):
    """Answer a fork request: the child's pid and pidfd."""
    if len(fds) != 1:
        for fd in fds:
            os.close(fd)
        send(control, {"error": "a fork request carries the server's output fd"})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    template = os.getpid()
    pid = os.fork()
    if pid == 0:
        host, port = request["host"], request["port"]
        serve_child(app, host, port, fds[0], template, control, wake_fds)
    os.close(fds[0])
    pidfd = os.pidfd_open(pid)
    try:
        send(control, {"pid": pid}, [pidfd])
    finally:
        os.close(pidfd)
    return pid


def serve(control, app):
    """Answer requests until the socket closes."""
    children = Children()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.set_wakeup_fd(wake_w)
    while True:
        readable, _, _ = select.select([control, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            children.reap()
        if control not in readable:
            continue
        data, fds, _, _ = socket.recv_fds(control, _MESSAGE_BYTES, 1)
        if not data:
            return
        request = json.loads(data)
        if request.get("op") == "fork":
            pid = fork_server(control, (wake_r, wake_w), app, request, fds)
            if pid is not None:
                children.running.add(pid)
        elif request.get("op") == "code":
            children.reap()
            send(control, {"code": children.codes.get(request["pid"])})
        else:
            send(control, {"error": f"unknown request {request!r}"})


def main(argv):
    # This script's folder would shadow the env's packages (`docker`, `cloud`, ...);
    # uvicorn's command line puts the working directory first instead.
    sys.path[0] = ""
    reference, control_fd = argv[1], int(argv[2])
    control = socket.socket(fileno=control_fd)
    app = prepare(control, reference)
    if app is None:
        return 0
    # The imported objects out of the collector's sight: its passes would write to
    # their headers in every server, unsharing the pages the servers share.
    gc.freeze()
    send(control, {"ready": True})
    serve(control, app)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
