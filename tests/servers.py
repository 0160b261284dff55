"""Real servers on 127.0.0.1 for the tests: OpenEnv envs, the local policy, evals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from openenv_v1 import local_policy
from openenv_v1.core.launch.readiness import ServerGone, wait_ready
from openenv_v1.core.launch.uv import NO_GRADIO_DIR, NOT_READY
from openenv_v1.core.launch.uv_prepared import prepared_env_dir
from openenv_v1.core.launch.uvicorn_forks import TEMPLATE_SCRIPT
from tests import zygote

ROOT = Path(__file__).resolve().parent.parent
WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"
TEST_ENVS = ROOT / "tests" / "envs"
TEST_RUN_VAR = "OPENENV_V1_TEST_RUN"
"""Set by each test run (its pytest controller's pid); its processes inherit it."""
BIN = Path(sys.executable).parent

COUNTER_SCRIPT = [
    '{"tool_name": "add", "arguments": {"n": 2}}',
    '{"tool_name": "peek"}',
    '{"tool_name": "add", "arguments": {"n": 4}}',
    '{"tool_name": "submit", "arguments": {"answer": 7}}',
]
"""A strategy for the counter env from `{"start": 1}`: steps rewarded 0.25, 0, 0.25
and 1.0 (done)."""


Server = subprocess.Popen | zygote.Started
"""A server process a test started: as it is, or forked from a zygote."""


def assert_crash_read_not_waited_out(message: str) -> None:
    """The launch failed on the server's own exit, read as it happened, not on the
    readiness timeout. Said by the failure's words rather than a time bound, which a
    loaded machine breaks (a wrong app's eval took 145 s under a load of 8 on 2
    cores, against a 120 s launch timeout)."""
    assert NOT_READY not in message, message


def wait_until(predicate, timeout: float, interval: float = 0.25) -> bool:
    """Poll `predicate` until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_http(url: str, proc: Server, timeout: float = 120.0) -> None:
    """Poll `url` until it answers below 500 (the shipped `readiness.wait_ready`);
    `RuntimeError` if `proc` exits first, `TimeoutError` after `timeout`."""
    try:
        wait_ready(
            url,
            timeout_s=timeout,
            running=lambda: proc.poll() is None,
            answers=lambda status: status < 500,
            not_ready=lambda: TimeoutError(f"{url} not up within {timeout}s"),
        )
    except ServerGone:
        raise RuntimeError(f"server for {url} exited with {proc.returncode}") from None


def serve_on_free_port(
    command: Callable[[int], list[str]],
    ready_path: str,
    env: dict[str, str] | None = None,
    *,
    cwd: Path | None = None,
    timeout: float = 120.0,
) -> tuple[Server, int]:
    """Start the server `command(port)` on a free port and wait until `ready_path`
    answers. A picked port is free again until the server binds it, and the suite's
    own connections take loopback ports: a server that exits before it is ready is
    started again on another port (twice at most). A `python -m uvicorn` of this
    venv is forked from a zygote (`tests/zygote.py`), other servers start as they
    are; either way in a session of its own."""
    starts_left = 3
    environ = dict(os.environ if env is None else env)
    while True:
        port = free_port()
        argv = command(port)
        if zygote.servable(argv, environ):
            proc = zygote.serve(argv, cwd=cwd, env=environ)
        else:
            proc = subprocess.Popen(argv, env=env, cwd=cwd, start_new_session=True)
        starts_left -= 1
        try:
            wait_http(f"http://127.0.0.1:{port}{ready_path}", proc, timeout)
            return proc, port
        except RuntimeError:  # it exited
            if not starts_left:
                raise
        except BaseException:
            stop(proc)
            raise


def without_gradio(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for an env server of the tests' own, with gradio hidden from it as a UV
    launch hides it from an env that does not declare it (`launch/uv.py`): OpenEnv
    imports gradio only for its optional web UI, and the import was ~3 of the ~4.5 s
    of CPU each such server took to start. No env served this way uses gradio."""
    path = [NO_GRADIO_DIR, *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def stop(proc: Server) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


@contextlib.contextmanager
def uvicorn_server(
    app: str, *, app_dir: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """An OpenEnv app served by uvicorn from this venv, gradio hidden; yields its base
    URL."""

    def command(port: int) -> list[str]:
        cmd = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1"]
        cmd += ["--port", str(port), "--log-level", "warning"]
        # Stopped at once even with a request pending (uvicorn waits by default).
        cmd += ["--timeout-graceful-shutdown", "1"]
        if app_dir is not None:
            cmd += ["--app-dir", str(app_dir)]
        return cmd

    environ = without_gradio({**os.environ, **(env or {})})
    proc, port = serve_on_free_port(command, "/health", environ)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@contextlib.contextmanager
def policy_server(
    mode: str,
    *,
    script: list[str] | None = None,
    delay: float | None = None,
    record: Path | None = None,
    clients: list[tuple[str, int]] | None = None,
) -> Iterator[str]:
    """The local OpenAI-compatible policy (`openenv_v1.local_policy`'s app and server,
    as its command line builds them); yields its `/v1` base URL. With `record`, it appends
    every request body it gets to that file (`recorded_requests`); with `clients`, the
    address each request came from (one per connection) to that list.

    It is served by uvicorn on a thread of this test process, on a socket bound
    before it starts (no port race): a process of its own cost ~1 s of CPU to start,
    for ~80 policies a suite. The command line itself runs in the demo's tests."""
    app = local_policy.create_app(
        mode,
        delay=local_policy.DEFAULT_DELAY_S if delay is None else delay,
        script=script,
        record=record,
    )
    if clients is not None:
        app = _noting_clients(app, clients)
    sock = local_policy.listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = local_policy.server(app)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="policy", daemon=True
    )
    thread.start()
    try:
        if not wait_until(lambda: server.started or not thread.is_alive(), 60, 0.01):
            raise TimeoutError(f"the local policy on port {port} not up within 60s")
        if not server.started:
            raise RuntimeError(f"the local policy on port {port} failed to start")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(local_policy.SHUTDOWN_GRACE_S + 10)
        sock.close()


def _noting_clients(app, clients: list[tuple[str, int]]):
    """`app`, appending each HTTP request's client address to `clients`."""

    async def noted(scope, receive, send):
        if scope["type"] == "http":
            clients.append(tuple(scope["client"]))
        await app(scope, receive, send)

    return noted


def recorded_requests(record: Path) -> list[dict]:
    """The request bodies a `policy_server(record=...)` received, in order."""
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines() if line]


def tool_calls_made(bodies: list[dict]) -> list[dict]:
    """Every tool call (`name`, `arguments`) in the recorded requests' messages."""
    return [
        call["function"]
        for body in bodies
        for message in body["messages"]
        for call in message.get("tool_calls") or ()
    ]


def assert_only_act_calls(bodies: list[dict]) -> None:
    """The model acted only through Wordle's `act` tool, with its one field."""
    calls = tool_calls_made(bodies)
    assert calls and {c["name"] for c in calls} == {"act"}
    assert all(json.loads(c["arguments"]).keys() == {"message"} for c in calls)


def assert_out_of_invalid_actions(trace: dict, steps: int) -> None:
    """The rollout ended cleanly on three invalid actions in a row, after `steps`."""
    assert trace["errors"] == [], trace["errors"]
    assert trace["stop_condition"] == "openenv_invalid_actions"
    assert trace["metrics"]["openenv_invalid_action_count"] == 3
    assert trace["metrics"]["openenv_steps"] == steps


def processes_matching(*needles: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of live processes whose command line contains every needle;
    under pytest-xdist, not those another worker's tests started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
        # The command line first: most processes fail it, and tests poll this.
        if not raw or not all(n in cmdline for n in needles):
            continue
        try:
            if "\nState:\tZ" in (entry / "status").read_text():
                continue
        except OSError:
            continue
        if not _started_elsewhere(entry):
            found.append((int(entry.name), cmdline))
    return found


def _started_elsewhere(proc: Path) -> bool:
    """Whether the process is provably another test run's (two suites can share a
    machine, e.g. both verifiers lines' run side by side) or another pytest-xdist
    worker's: its
    environment (inherited from the test process that started it) names another run
    or worker. A process whose environment cannot be read or names neither is counted
    as ours."""
    ours = {
        name: os.environ[name]
        for name in (TEST_RUN_VAR, "PYTEST_XDIST_WORKER")
        if name in os.environ
    }
    if not ours:
        return False
    try:
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    for item in environ:
        name, _, value = item.decode(errors="replace").partition("=")
        if name in ours and value != ours[name]:
            return True
    return False


def wordle_uv_servers() -> list[tuple[int, str]]:
    """Live processes of UV-launched local Wordle servers: `uv run --project ...` (a
    launch that syncs the project's environment) and the uvicorn it runs, or that
    uvicorn run directly from the prepared environment (a repeated launch), and a
    pool's template processes with the servers forked from them. Servers started
    directly with `python -m uvicorn` are not counted."""
    uv = processes_matching("uv run", f"--project {WORDLE_PROJECT} ")
    return sorted(set(uv + wordle_uvicorns() + wordle_templates_and_forks()))


def wordle_uvicorns() -> list[tuple[int, str]]:
    """The uvicorn process of each UV-launched local Wordle server, one per server:
    the one that runs from this checkout's prepared environment (under `uv run` or
    not, or forked from a pool's template), so that other checkouts' servers on the
    machine are not counted."""
    env_dir = prepared_env_dir(str(WORDLE_PROJECT), "wordle-env")
    started = processes_matching(f"{env_dir}/bin/uvicorn ", WORDLE_APP)
    return started + wordle_forked_servers()


def wordle_templates_and_forks() -> list[tuple[int, str]]:
    """Pools' template processes of the local Wordle env (`uvicorn_forks`), and the
    servers forked from them, which keep their command line."""
    env_dir = prepared_env_dir(str(WORDLE_PROJECT), "wordle-env")
    return processes_matching(f"{env_dir}/bin/python {TEMPLATE_SCRIPT} ", WORDLE_APP)


def wordle_forked_servers() -> list[tuple[int, str]]:
    """The servers forked from a template: their parent is one."""
    found = wordle_templates_and_forks()
    templates = {pid for pid, _ in found}
    return [(pid, cmd) for pid, cmd in found if parent_pid(pid) in templates]


def parent_pid(pid: int) -> int | None:
    """Process `pid`'s parent; None once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rpartition(")")[2].split()[1])
    return None


def listening_port(pid: int) -> int | None:
    """The TCP port process `pid` listens on (a forked server's command line does not
    name it); None while it listens on none."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
        sockets = set()
        for fd in fds:
            with contextlib.suppress(OSError):
                sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    except OSError:
        return None
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and f"socket:[{fields[9]}]" in sockets:
                    return int(fields[1].rpartition(":")[2], 16)
    return None


def user_simulators() -> list[tuple[int, str]]:
    """Live `openenv_v1.vf02.user` processes started by this checkout's evals (verifiers
    runs them with the eval's own Python), and the simulator fork servers and their
    forks (which keep the fork server's command line)."""
    return processes_matching(
        f"{BIN}/python", "-m openenv_v1.vf02.user"
    ) + processes_matching(f"{BIN}/python", "-m openenv_v1.vf02.simulator.fork_server")


def tool_servers() -> list[tuple[int, str]]:
    """Live `openenv_v1.vf02.tools` processes (native tool calling) started by this
    checkout's evals."""
    return processes_matching(f"{BIN}/python", "-m openenv_v1.vf02.tools")


def run_eval(
    args: list[str],
    cwd: Path,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """`eval ...` as a user types it (no push), forked from the worker's eval zygote
    (`tests/zygote.py`); returns the process and its traces. `env` adds to (or
    overrides) this process's environment."""
    proc = zygote.run(
        [str(BIN / "eval"), *args, "--no-push"],
        cwd=cwd,
        env=eval_environ(env),
        timeout=timeout,
    )
    return proc, read_traces(cwd)


def run_cli(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 180.0,
) -> subprocess.CompletedProcess[str]:
    """`openenv-v1 ...` as a user types it, in `cwd` (this process's by default), with
    `env` (this process's by default) as its whole environment; forked from the
    worker's `openenv-v1` zygote (`tests/zygote.py`), output captured as text.
    Tests of how the command ends (a signal) start it with `subprocess` instead."""
    return zygote.run(
        [str(BIN / "openenv-v1"), *args],
        cwd=cwd or Path.cwd(),
        env=dict(os.environ if env is None else env),
        timeout=timeout,
    )


def eval_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus the local policy's key, for an `eval`."""
    return {**os.environ, "LOCAL_POLICY_KEY": "local", **(extra or {})}


def read_traces(cwd: Path) -> list[dict]:
    """Every trace an eval run in `cwd` wrote."""
    traces = []
    for path in sorted(cwd.glob("outputs/*/*/traces.jsonl")):
        traces += [json.loads(line) for line in path.read_text().splitlines() if line]
    return traces


NULL_HARNESS = ["--harness.id", "null"]
"""`eval` flags for verifiers' own `null` harness, instead of the package's default."""


def model_flags(policy_url: str) -> list[str]:
    return [
        "-m",
        "local-policy",
        "--client.base-url",
        policy_url,
        "--client.api-key-var",
        "LOCAL_POLICY_KEY",
    ]


def wordle_uv_flags(resets: str, app: str = WORDLE_APP) -> list[str]:
    """`eval` flags launching the local Wordle project with UV, one task per reset."""
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": app})
    return [
        "openenv-v1",
        "--taskset.env",
        "local/wordle",
        "--taskset.task.user.provider-kwargs",
        kwargs,
        "--taskset.resets",
        resets,
    ]


def wordle_uv_eval_command(policy_url: str, resets: str, *extra: str) -> list[str]:
    """The full `eval` command for a UV-launched local Wordle run with the package's
    default harness, no push and no live display; `extra` flags go before the model
    flags. (Not verifiers' `null` harness: its program installs uv with pip, from the
    index, on every eval, ~3 s of CPU that none of these tests is about.)"""
    return [
        str(BIN / "eval"),
        *wordle_uv_flags(resets),
        *extra,
        "--no-push",
        "--no-rich",
        *model_flags(policy_url),
    ]


def assert_steps_between_model_calls(trace: dict) -> None:
    """Each step the episode took is timed on the trace (`openenv_timing`), and its
    answer arrived after the model reply it played and before the next request:
    what `benchmarks/real_model.py` takes out of the time between two model calls."""
    timing = trace["info"]["openenv_timing"]
    ends = timing["step_end"]
    assert len(ends) == len(timing["step_s"]) == trace["metrics"]["openenv_steps"]
    calls = sorted((c["time"]["start"], c["time"]["end"]) for c in trace["calls"])
    assert ends == sorted(ends)
    for end in ends:
        before = [c for c in calls if c[1] < end]
        assert before, f"a step answered at {end} before any model reply"
        later = [c for c in calls if c[0] > before[-1][1]]
        assert not later or end <= later[0][0]
