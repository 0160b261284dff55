"""Training scale: Wordle episodes at 64 to 512 in flight, five ways, in one run.

    uv run python benchmarks/scale.py [--levels 64,128,256,512] [--per-level 4]
        [--legs raw,raw-paced,vf04,vf04-server,vf02] [--vf02-max 512]

Each level runs `per-level x concurrency` episodes (2,048 at 512) of the local Wordle
env (envs/wordle), played by the local scripted policy (`openenv_v1.local_policy
--mode solver`), each with its own seed:

- `raw`: a bare OpenEnv `GenericEnvClient` per episode, on servers launched directly
  (as many as the `vf04` leg used at that level, each at the env's default session
  limit), guessing with the same solver in process, steps back to back: more load
  than an eval puts on the servers.
- `raw-paced`: the same bare client asking the same local policy for every move over
  HTTP, as an eval does: the env servers under an eval's rhythm, the baseline the
  `p99/raw` column divides by (the unpaced `raw` when it is the only one).
- `vf04`: `vf-eval openenv-v1` on verifiers 0.4 with its defaults: shared UV-launched
  servers, the package's chat harness, `-c` = the level.
- `vf04-server`: the trainer's path: verifiers 0.4's env server (`serve_env`, a broker
  over 2 worker processes) with `EnvClient.run` called for every task, `level` at once.
- `vf02`: `eval openenv-v1` on verifiers 0.2 (a user-simulator process per rollout) with
  its defaults and `-c` = the level, up to `--vf02-max`; one episode per slot
  (`--vf02-episodes`), as 0.2 runs about a quarter as fast.

The 0.4 legs run in a second environment of this project synced from `uv.lock`
(`--vf04-venv`, outside the timing). For each leg and level it prints episodes/s,
success (every trace ended on `openenv_done` with its reward equal to the env's
account, no error), p50/p99 wall time of one env step (the client's view: the traces'
`info["openenv_timing"]`, or the raw client's own clock), the peak memory of the
leg's processes and of its env servers, the servers used, and processes left behind.
Then the soak series of the largest level: every 100 episodes, memory, open files and
threads of the eval (or env-server) process and of the env servers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from openenv_v1.core.process_group import die_with_owner

ROOT = Path(__file__).resolve().parent.parent
WORDLE_PROJECT = ROOT / "envs" / "wordle"
WORDLE_APP = "wordle_env.server.app:app"
WORDLE_SESSIONS = 64
"""The local Wordle env's default session limit per server (`WORDLE_MAX_SESSIONS`)."""
PAGE = os.sysconf("SC_PAGE_SIZE")
VF02_BIN = Path(sys.executable).parent


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


@dataclass
class LegResult:
    leg: str
    level: int
    episodes: int
    ok: int
    wall_s: float
    step_s: list[float]
    peak_main_mb: float = 0.0
    peak_servers_mb: float = 0.0
    servers: int = 0
    left: int = 0
    errors: list[str] = field(default_factory=list)
    series: list[Sample] = field(default_factory=list)
    actions: dict[int, list[str]] = field(default_factory=dict)
    """The model's replies per reset seed (the raw leg replays them)."""


# --- processes ---------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _proc_table() -> dict[int, tuple[int, str, int, int]]:
    """pid -> (parent pid, command line, rss bytes, threads) of live processes."""
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
            )
    return table


def _descendants(root: int, table: dict[int, tuple[int, str, int, int]]) -> set[int]:
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
    for pid, (_, cmd, _, _) in _proc_table().items():
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


# --- traces --------------------------------------------------------------------------


def check_traces(traces: list[dict], result: LegResult) -> None:
    """Count the episodes that ended well and collect their step times."""
    for trace in traces:
        errors = [e["message"][:160] for e in trace.get("errors") or []]
        account = (trace.get("info") or {}).get("openenv") or {}
        reward = (trace.get("rewards") or {}).get("openenv_reward")
        if isinstance(reward, dict):  # verifiers 0.4: {"score": ...}; 0.2: the value
            reward = reward.get("score")
        good = (
            not errors
            and trace.get("stop_condition") == "openenv_done"
            and reward is not None
            and reward == account.get("reward")
        )
        result.ok += good
        if not good:
            result.errors.append(errors[0] if errors else trace.get("stop_condition"))
        timing = (trace.get("info") or {}).get("openenv_timing") or {}
        result.step_s += timing.get("step_s") or []
        seed = (((trace.get("task") or {}).get("data") or {}).get("reset") or {}).get(
            "seed"
        )
        if good and seed is not None:
            result.actions[seed] = [
                node["message"]["content"]
                for node in trace.get("nodes") or []
                if (node.get("message") or {}).get("role") == "assistant"
            ]


def read_jsonl(paths) -> list[dict]:
    return [
        json.loads(line)
        for path in paths
        for line in path.read_text().splitlines()
        if line
    ]


def count_lines(pattern: str, workdir: Path):
    def count() -> int:
        total = 0
        for path in workdir.glob(pattern):
            with contextlib.suppress(OSError):
                total += path.read_bytes().count(b"\n")
        return total

    return count


# --- legs -----------------------------------------------------------------------------


def resets(episodes: int) -> list[dict]:
    return [{"seed": i} for i in range(episodes)]


def eval_leg(
    leg: str, command: list[str], level: int, episodes: int, pattern: str
) -> LegResult:
    """One `eval` / `vf-eval` run; traces are read from its outputs."""
    workdir = Path(tempfile.mkdtemp(prefix=f"openenv-scale-{leg}-"))
    before = wordle_servers_of_this_checkout()
    env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    env.pop("VIRTUAL_ENV", None)
    started = time.monotonic()
    with (workdir / "stderr.txt").open("w") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            preexec_fn=die_with_owner,
        )
        with Sampler(proc.pid, count_lines(pattern, workdir)) as sampler:
            proc.wait()
    wall = time.monotonic() - started
    records = read_jsonl(workdir.glob(pattern))
    traces = [t for r in records for t in r.get("traces", [r])]
    result = LegResult(leg, level, episodes, 0, wall, [])
    check_traces(traces, result)
    print(
        f"  {leg} @ {level}: {len(result.actions)} episodes' replies kept"
        + (
            f", {sampler.peak_simulators} simulators alive at most"
            if leg == "vf02"
            else ""
        ),
        flush=True,
    )
    if proc.returncode != 0:
        tail = (workdir / "stderr.txt").read_text()[-600:]
        result.errors.append(f"exit {proc.returncode}: {tail}")
    result.errors += ["lost"] * (episodes - len(traces))
    result.peak_main_mb, result.peak_servers_mb = (
        sampler.peak_main,
        sampler.peak_servers,
    )
    result.servers = len(sampler.server_pids)
    result.series = sampler.series()
    result.left = leftovers(before)
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def run_flags(policy_url: str, level: int, episodes: int) -> list[str]:
    """The flags both verifiers lines' evals take alike: the run's size, the local
    policy, no push."""
    return [
        *("-n", str(episodes), "-r", "1", "-c", str(level)),
        *("-m", "local-policy", "--client.base-url", policy_url),
        *("--client.api-key-var", "LOCAL_POLICY_KEY", "--no-push"),
    ]


def vf04_command(vf04_bin: Path, policy_url: str, level: int, episodes: int) -> list:
    kwargs = json.dumps({"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP})
    return [
        str(vf04_bin / "vf-eval"),
        *("openenv-v1", "--env.taskset.env", "local/wordle"),
        *("--env.taskset.provider-kwargs", kwargs),
        *("--env.taskset.resets", json.dumps(resets(episodes))),
        *run_flags(policy_url, level, episodes),
    ]


def vf02_command(
    policy_url: str, level: int, episodes: int, config: Path, extra: list[str]
) -> list:
    config.write_text(
        '[taskset]\nid = "openenv-v1"\nenv = "local/wordle"\n'
        f"resets = [{', '.join(f'{{ seed = {i} }}' for i in range(episodes))}]\n\n"
        "[taskset.task.user.provider_kwargs]\n"
        f'project_path = "{WORDLE_PROJECT}"\napp = "{WORDLE_APP}"\n'
    )
    return [
        *(str(VF02_BIN / "eval"), "@", str(config)),
        *run_flags(policy_url, level, episodes),
        *extra,
        "--no-rich",
    ]


def server_leg(vf04_bin: Path, policy_url: str, level: int, episodes: int):
    """`serve_env` (2 workers) in its own process, driven by `EnvClient.run` from a
    second process (`--trainer`), both in the verifiers 0.4 environment."""
    workdir = Path(tempfile.mkdtemp(prefix="openenv-scale-server-"))
    address = f"tcp://127.0.0.1:{free_port()}"
    taskset = {
        "id": "openenv-v1",
        "env": "local/wordle",
        "provider_kwargs": {"project_path": str(WORDLE_PROJECT), "app": WORDLE_APP},
        "resets": resets(episodes),
    }
    python = str(vf04_bin / "python")
    before = wordle_servers_of_this_checkout()
    env = {**os.environ, "LOCAL_POLICY_KEY": "local"}
    env.pop("VIRTUAL_ENV", None)
    server = subprocess.Popen(
        [python, __file__, "--serve", address, json.dumps({"taskset": taskset})],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=(workdir / "server.txt").open("w"),
        preexec_fn=die_with_owner,
    )
    out = workdir / "traces.jsonl"
    result = LegResult("vf04-server", level, episodes, 0, 0.0, [])
    try:
        trainer = [python, __file__, "--trainer", address, policy_url, str(level)]
        trainer += [json.dumps(taskset), str(out)]
        with Sampler(server.pid, count_lines("traces.jsonl", workdir)) as sampler:
            proc = subprocess.run(
                trainer,
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                preexec_fn=die_with_owner,
            )
        if proc.returncode != 0:
            result.errors.append(
                f"trainer exit {proc.returncode}: {proc.stderr[-600:]}"
            )
        result.wall_s = json.loads(proc.stdout.strip().splitlines()[-1])["wall_s"]
    finally:
        stop_group(server)
    traces = read_jsonl([out]) if out.exists() else []
    check_traces(traces, result)
    result.errors += ["lost"] * (episodes - len(traces))
    result.peak_main_mb, result.peak_servers_mb = (
        sampler.peak_main,
        sampler.peak_servers,
    )
    result.servers = len(sampler.server_pids)
    result.series = sampler.series()
    result.left = leftovers(before)
    shutil.rmtree(workdir, ignore_errors=True)
    return result


def serve(address: str, config: str) -> None:
    """(In the verifiers 0.4 environment.) An env server as prime-rl starts one."""
    from verifiers.v1.serve import serve_env

    serve_env(
        max_workers=2, elastic=False, address=address, config_data=json.loads(config)
    )


def trainer(address: str, policy_url: str, level: int, taskset: str, out: str) -> None:
    """(In the verifiers 0.4 environment.) Every task through `EnvClient.run`,
    `level` at once, as prime-rl's orchestrator sends them; traces appended to `out`
    as they come back; prints the wall time of the run."""
    from verifiers.v1 import SamplingConfig
    from verifiers.v1.configs.client import EvalClientConfig
    from verifiers.v1.serve import EnvClient

    from openenv_v1 import OpenEnvConfig, OpenEnvTaskset

    tasks = [
        t.data.model_dump(mode="json")
        for t in OpenEnvTaskset(OpenEnvConfig(**json.loads(taskset))).load()
    ]

    async def main() -> float:
        client = EnvClient(address)
        await client.wait_for_server_startup(timeout=300)
        model = EvalClientConfig(base_url=policy_url, api_key_var="LOCAL_POLICY_KEY")
        gate = asyncio.Semaphore(level)
        with open(out, "a") as sink:

            async def one(task: dict) -> None:
                async with gate:
                    try:
                        episode = await client.run(
                            model, "local-policy", SamplingConfig(), task
                        )
                        lines = [t.model_dump_json() for t in episode.traces]
                    except Exception as e:
                        failed = {"errors": [{"message": f"{type(e).__name__}: {e}"}]}
                        lines = [json.dumps(failed)]
                    sink.write("".join(line + "\n" for line in lines))
                    sink.flush()

            started = time.monotonic()
            await asyncio.gather(*(one(task) for task in tasks))
            wall = time.monotonic() - started
        await client.close()
        return wall

    print(json.dumps({"wall_s": asyncio.run(main())}))


def raw_leg(
    level: int,
    episodes: int,
    servers: int,
    replay: dict[int, list[str]],
    policy_url: str | None = None,
) -> LegResult:
    """A bare `GenericEnvClient` per episode on `servers` directly launched servers.
    Unpaced (`raw`): stepping the replies the eval leg's model sent for the same seed
    (the solver guesses, in process, for a seed with none), back to back. Paced
    (`raw-paced`, with `policy_url`): asking the same local policy for every move
    over HTTP, as an eval does, so the servers see an eval's rhythm of steps."""
    from openenv_v1.core.uv_launch import SupervisedUVProvider
    from openenv_v1.wordle_solver import next_guess

    providers = []
    try:
        for _ in range(servers):
            provider = SupervisedUVProvider(
                project_path=str(WORDLE_PROJECT), app=WORDLE_APP, host="127.0.0.1"
            )
            providers.append(provider)
            provider.start()
        urls = [provider.wait_for_ready() for provider in providers]
        name = "raw-paced" if policy_url else "raw"
        result = LegResult(name, level, episodes, 0, 0.0, [])
        limits = httpx.Limits(max_connections=level, max_keepalive_connections=level)
        model = httpx.AsyncClient(timeout=600, limits=limits)

        async def move(seen: str, script: list[str]) -> str:
            if policy_url is None:
                return script.pop(0) if script else f"[{next_guess(seen)}]"
            body = {"model": "local", "messages": [{"role": "user", "content": seen}]}
            reply = await model.post(f"{policy_url}/chat/completions", json=body)
            reply.raise_for_status()
            return reply.json()["choices"][0]["message"]["content"]

        async def main() -> None:
            from openenv_v1.core.light_import import generic_client_class

            client_class = generic_client_class()
            gate = asyncio.Semaphore(level)
            # Each server at the Wordle env's own session limit: an episode waits
            # for room on its server, as a pool's lease would.
            room = {url: asyncio.Semaphore(WORDLE_SESSIONS) for url in urls}

            async def one(i: int) -> None:
                url = urls[i % len(urls)]
                async with gate, room[url]:
                    try:
                        async with client_class(
                            base_url=url,
                            connect_timeout_s=120,
                            message_timeout_s=120,
                        ) as client:
                            reply = await client.reset(seed=i)
                            seen = str(reply.observation)
                            script = list(replay.get(i, []))
                            while not reply.done:
                                message = await move(seen, script)
                                t0 = time.perf_counter()
                                reply = await client.step({"message": message})
                                result.step_s.append(time.perf_counter() - t0)
                                seen += "\n" + str(reply.observation)
                        result.ok += 1
                    except Exception as e:
                        result.errors.append(f"{type(e).__name__}: {e}"[:160])

            started = time.monotonic()
            await asyncio.gather(*(one(i) for i in range(episodes)))
            result.wall_s = time.monotonic() - started
            await model.aclose()

        asyncio.run(main())
        result.servers = servers
        return result
    finally:
        for provider in providers:
            provider.stop()


# --- report ---------------------------------------------------------------------------


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_table(results: list[LegResult]) -> None:
    head = (
        f"{'leg':<12}{'in flight':>10}{'episodes':>9}{'ok':>7}{'success':>9}"
        f"{'eps/s':>8}{'p50 step':>10}{'p99 step':>10}{'p99/raw':>8}"
        f"{'peak MB':>9}{'servers MB':>11}{'servers':>8}{'left':>5}"
    )
    print(head)
    raw = {r.level: pct(r.step_s, 0.99) for r in results if r.leg == "raw"}
    raw |= {r.level: pct(r.step_s, 0.99) for r in results if r.leg == "raw-paced"}
    for r in results:
        p99 = pct(r.step_s, 0.99)
        baseline = r.leg.startswith("raw") or r.level not in raw
        ratio = "" if baseline else f"{p99 / raw[r.level]:.2f}x"
        print(
            f"{r.leg:<12}{r.level:>10}{r.episodes:>9}{r.ok:>7}"
            f"{100 * r.ok / r.episodes:>8.1f}%{r.ok / r.wall_s:>8.1f}"
            f"{1e3 * pct(r.step_s, 0.5):>8.1f}ms{1e3 * p99:>8.1f}ms{ratio:>8}"
            f"{r.peak_main_mb:>9.0f}{r.peak_servers_mb:>11.0f}{r.servers:>8}"
            f"{r.left:>5}"
        )
    for r in results:
        kinds = sorted(set(r.errors))
        if kinds:
            print(f"  {r.leg} @ {r.level}: {len(r.errors)} errors: {kinds[:5]}")


def print_series(result: LegResult) -> None:
    print(f"\nsoak: {result.leg} at {result.level} in flight, every 100 episodes")
    print(
        f"{'episodes':>9}{'main MB':>9}{'fds':>6}{'threads':>8}"
        f"{'servers MB':>11}{'fds':>6}{'threads':>8}{'servers':>8}"
    )
    for s in result.series:
        print(
            f"{s.episodes:>9}{s.main_rss_mb:>9.0f}{s.main_fds:>6}{s.main_threads:>8}"
            f"{s.servers_rss_mb:>11.0f}{s.servers_fds:>6}{s.servers_threads:>8}"
            f"{s.servers:>8}"
        )


def vf04_environment(venv: Path) -> Path:
    """This project's verifiers 0.4 environment at `venv`, synced from `uv.lock`;
    returns its bin directory."""
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    subprocess.run(
        ["uv", "sync", "--locked", "--extra", "vf04", "--no-group", "vf02", "-q"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    return venv / "bin"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="64,128,256,512")
    parser.add_argument("--per-level", type=int, default=4)
    parser.add_argument("--legs", default="raw,raw-paced,vf04,vf04-server,vf02")
    parser.add_argument(
        "--vf02-max", type=int, default=512, help="the vf02 leg's largest level"
    )
    parser.add_argument(
        "--vf02-episodes",
        type=int,
        default=None,
        help="episodes of the vf02 leg per level (default: one per slot, the "
        "level itself; 0.2 runs about a quarter as fast as 0.4)",
    )
    parser.add_argument(
        "--vf02-flags",
        default="",
        help="more flags for the vf02 leg's eval, e.g. '--taskset.max-simulators 512'",
    )
    parser.add_argument(
        "--vf04-venv", type=Path, default=Path(tempfile.gettempdir()) / "venv-vf04"
    )
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--trainer", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(*args.serve)
    if args.trainer:
        address, policy_url, level, taskset, out = args.trainer
        return trainer(address, policy_url, int(level), taskset, out)

    legs = args.legs.split(",")
    levels = [int(x) for x in args.levels.split(",")]
    vf04_bin = (
        vf04_environment(args.vf04_venv)
        if {"vf04", "vf04-server"} & set(legs)
        else None
    )
    results: list[LegResult] = []
    with policy(free_port(), Path(sys.executable)) as policy_url:
        for level in levels:
            episodes = args.per_level * level
            servers, replay = 0, {}
            for leg in legs:
                if leg == "vf04":
                    assert vf04_bin is not None
                    command = vf04_command(vf04_bin, policy_url, level, episodes)
                    result = eval_leg(
                        leg, command, level, episodes, "outputs/*/traces.jsonl"
                    )
                    servers, replay = result.servers, result.actions
                elif leg == "vf04-server":
                    assert vf04_bin is not None
                    result = server_leg(vf04_bin, policy_url, level, episodes)
                elif leg == "vf02":
                    if level > args.vf02_max:
                        continue
                    count = args.vf02_episodes or level
                    config = Path(tempfile.mkdtemp()) / "wordle.toml"
                    command = vf02_command(
                        policy_url, level, count, config, shlex.split(args.vf02_flags)
                    )
                    result = eval_leg(
                        leg, command, level, count, "outputs/*/*/traces.jsonl"
                    )
                elif leg in ("raw", "raw-paced"):
                    continue  # after the eval legs, on as many servers as vf04 used
                else:
                    raise SystemExit(f"unknown leg {leg!r}")
                results.append(result)
                print(
                    f"  done: {leg} @ {level}: {result.ok}/{result.episodes} ok",
                    flush=True,
                )
            for leg, paced in (("raw", None), ("raw-paced", policy_url)):
                if leg in legs:
                    count = max(1, servers or level // 64)
                    result = raw_leg(level, episodes, count, replay, paced)
                    results.append(result)
                    print(
                        f"  done: {leg} @ {level}: {result.ok}/{episodes} ok",
                        flush=True,
                    )
    print(f"\n{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}\n")
    print_table(results)
    for result in results:
        if result.level == max(levels) and result.series:
            print_series(result)
    print()
    print(
        "step: wall time of one env step as the client saw it (traces' "
        "info.openenv_timing; the raw client's own clock)"
    )


if __name__ == "__main__":
    main()
