"""Run every env of an OpenEnv checkout through `openenv-v1 check` and a short `eval`.

    uv run python compatibility/run.py --envs-dir /path/to/OpenEnv/envs
    uv run python compatibility/run.py --envs-dir ... --only chess_env,maze_env --json

For each env folder (one uv project each), one at a time:

1. `openenv-v1 check --project-path DIR/<env> --json` with a `--reset` and an
   `--action` (a reply as a model would write it) from `ENVS` below, which were
   written from each env's action model and reset signature.
2. Where `ENVS` has a script of replies: a real `eval openenv-v1 --taskset.env
   local/<env> ...` of one rollout against the local policy in `script` mode
   (`python -m openenv_v1.local_policy --mode script`), null harness, no push.

Envs known not to run offline (or without an account, a GPU, a simulator...) are
listed in `ENVS` with the cause and are not run unless `--all`.

It prints a markdown table: env | check | eval | notes. A failure is marked "env's
own need" when its cause belongs to the env (a missing download, key, binary or
dependency), and "adapter?" otherwise: those are worth a look. After each env it
looks for processes it started that are still alive (servers under the env's
folder or prepared venv) and reports and stops them.

Every process it starts runs in its own process group and is stopped (SIGTERM, then
SIGKILL) when its env is done, on a timeout, and on Ctrl-C or SIGTERM.

The env servers' prepared venvs go where openenv-v1 puts them (set
OPENENV_V1_CACHE_DIR to choose). A first launch installs the env's dependencies:
`--launch-timeout` (default 600 s) covers it.

`--docker` runs each env in a container built from the env folder's own Dockerfile
on this host's Docker engine instead (the image is tagged by a hash of the folder and
reused on the next run). `--provider swarm` (with `--provider-kwargs '{"publish":
"host"}'`) runs the same images as a Swarm service.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recipes  # this folder's: the envs that need more (issue 28)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
KEY_VAR = "LOCAL_POLICY_KEY"


def j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


@dataclass(frozen=True)
class EnvSpec:
    reset: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    """One reply for the check's step, as a model would write it."""
    script: list[str] | None = None
    """Replies for the eval, by turn; None: no eval."""
    max_turns: int = 10
    env_vars: dict[str, str] = field(default_factory=dict)
    """Passed to the server (`provider_kwargs.env_vars`)."""
    web_ui: bool = False
    """Let the server import gradio (`--web-ui`)."""
    skip: str | None = None
    """Why the env cannot run here; not run unless --all."""
    step_timeout: float | None = None
    """A floor for `--step-timeout` (a browser's reset takes a minute here)."""
    note: str = ""


def step_timeout(spec: EnvSpec, args: argparse.Namespace) -> float:
    return max(args.step_timeout, spec.step_timeout or 0.0)


def moves(field_name: str, values: list[Any]) -> list[str]:
    return [j({field_name: v}) for v in values]


# Maze: the default 8x8 maze, start (0,0), exit (7,7); 3 = right, 1 = down.
MAZE_PATH = [3, 3, 3, 3, 1, 1, 3, 3, 1, 3, 1, 1, 1, 1]
# Chess: white to move has one legal move (h1h2), then black mates (b4h4). The env
# gives the agent a random colour: as white it plays h1h2 and is mated; as black
# the opponent plays h1h2 first, the agent's h1h2 is refused (-0.1), b4h4 mates.
CHESS_FEN = "5k2/8/6r1/8/1r6/8/8/7K w - - 0 1"
DIPG_REPLY = (
    "<|channel|>analysis<|message|>The context does not say.<|end|>"
    "<|channel|>proof<|message|>No quote supports an answer.<|end|>"
    "<|channel|>final<|message|>The provided sources do not contain the answer.<|end|>"
)

ENVS: dict[str, EnvSpec] = {
    # --- runnable offline ---
    "connect4_env": EnvSpec(
        action=j({"column": 3}),
        # The agent plays both colours: column 0 four times for the first player.
        script=moves("column", [0, 1, 0, 1, 0, 1, 0]),
    ),
    "chess_env": EnvSpec(
        reset={"fen": CHESS_FEN},
        action=j({"move": "h1h2"}),
        script=moves("move", ["h1h2", "b4h4"]),
        max_turns=4,
    ),
    "maze_env": EnvSpec(
        reset={"seed": 1},
        action=j({"action": 3}),
        script=moves("action", MAZE_PATH),
        max_turns=20,
    ),
    "grid_world_env": EnvSpec(
        action=j({"action": "DOWN"}),
        script=moves("action", ["DOWN"] * 4 + ["RIGHT"] * 4),
        max_turns=12,
    ),
    "wildfire_env": EnvSpec(
        action=j({"action": "wait"}),
        script=[j({"action": "water", "x": 1, "y": 1}), j({"action": "wait"})],
        max_turns=4,
        note="no end in 4 turns by design (fire burns out or 128 steps)",
    ),
    "reasoning_gym_env": EnvSpec(
        action="100",
        # The default leg_counting dataset (seed 42): the first question's answer.
        script=["100"],
        max_turns=2,
    ),
    "snake_env": EnvSpec(
        action=j({"action": 0}),
        script=moves("action", [0]),
        max_turns=30,
    ),
    "coding_env": EnvSpec(
        action="print(6 * 7)",
        script=["print(6 * 7)", j({"code": "import math\nprint(math.pi)"})],
        max_turns=2,
        note="never done by design",
    ),
    "repl_env": EnvSpec(
        action=j({"code": "x = 6 * 7\nprint(x)"}),
        script=[
            j({"code": "x = 6 * 7\nprint(x)"}),
            j({"code": "", "is_final": True, "final_answer": "42"}),
        ],
        max_turns=3,
    ),
    "dipg_safety_env": EnvSpec(
        action=j({"llm_response": DIPG_REPLY}),
        script=[DIPG_REPLY],
        max_turns=2,
    ),
    "carla_env": EnvSpec(
        action=j({"action_type": "observe"}),
        script=[j({"action_type": "observe"}), j({"action_type": "emergency_stop"})],
        max_turns=3,
        note="CARLA_MODE=mock (the default): simulated physics, no CARLA server",
        skip="its `carla` extra makes uv's lock unsatisfiable (carla-ue5-api needs "
        "Python >= 3.11, requires-python says >= 3.10) and its uv.lock is stale; "
        "with requires-python >= 3.11 it launches and steps in mock mode",
    ),
    "textarena_env": EnvSpec(
        action="[50]",
        # 1..20 in 10 guesses, no feedback read: a loss unless the number is low.
        script=[f"[{n}]" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)],
        max_turns=12,
        env_vars={
            "TEXTARENA_ENV_ID": "GuessTheNumber-v0",
            "TEXTARENA_DOWNLOAD_NLTK": "0",
        },
        note="GuessTheNumber-v0: the default Wordle-v0 needs NLTK `words` data",
    ),
    "atari_env": EnvSpec(
        action=j({"action_id": 0}),
        script=moves("action_id", [0, 1]),
        max_turns=3,
        note="rgb frames go to the model as PNG images",
    ),
    "git_env": EnvSpec(
        action=j({"action_type": "list_repos"}),
        script=[j({"action_type": "list_repos"})],
        max_turns=2,
        skip="needs its Gitea server (GITEA_URL): without one, building each "
        "session's env waits about 30 s for it and every git action fails",
    ),
    "echo_env": EnvSpec(
        action=j({"tool_name": "echo_message", "arguments": {"message": "hi"}}),
        script=[j({"tool_name": "echo_message", "arguments": {"message": "hi"}})],
        max_turns=2,
    ),
    "sumo_rl_env": EnvSpec(
        action=j({"phase_id": 0}),
        script=moves("phase_id", [0, 1]),
        max_turns=3,
        env_vars={
            "SUMO_NET_FILE": "{env}/nets/single-intersection/single-intersection.net.xml",
            "SUMO_ROUTE_FILE": "{env}/nets/single-intersection/single-intersection.rou.xml",
        },
        note="net files from the env's nets/ (the default paths are the image's)",
        skip="needs the SUMO simulator binary (`sumo` on PATH / SUMO_HOME; apt in "
        "its image, not a dependency): its factory fails with FileNotFoundError "
        "'sumo'",
    ),
    "finrl_env": EnvSpec(
        action=j({"actions": [0.0]}),
        script=[j({"actions": [0.5]}), j({"actions": [-0.5]})],
        max_turns=3,
        note="the built-in sample data (no FINRL_CONFIG_PATH)",
    ),
    # --- known not to run offline here ---
    "openspiel_env": EnvSpec(
        action=j({"action_id": 1}),
        skip="needs OpenSpiel (`pyspiel`), not in its dependencies: built from "
        "source in its Docker image",
    ),
    "calendar_env": EnvSpec(
        action=j({"tool_name": "list_calendars", "arguments": {}}),
        skip="a custom server (MCPHTTPEnvServer): HTTP /reset /step /state only, "
        "no OpenEnv WebSocket /ws (403)",
    ),
    "websearch_env": EnvSpec(
        action=j({"query": "OpenEnv"}),
        skip="needs a SERPER_API_KEY and network (google.serper.dev); its /schema "
        "answers 500 (observation field `list[WebContent]` has no JSON schema)",
    ),
    "chat_env": EnvSpec(
        action=j({"tokens": [15496]}),
        skip="downloads a tokenizer from Hugging Face for each env instance "
        "(TOKENIZER_NAME, default gpt2): FACTORY_ERROR at reset",
    ),
    "finqa_env": EnvSpec(
        action=j({"tool_name": "get_descriptions", "arguments": {}}),
        skip="needs the FinQA data from Hugging Face (download_data.sh, "
        "FINQA_DATA_PATH): FileNotFoundError benchmark_questions/finqa.csv",
    ),
    "agent_world_model_env": EnvSpec(
        action=j({"tool_name": "list_scenarios", "arguments": {}}),
        skip="reset needs a `scenario`, whose data it downloads from Hugging Face "
        "(hf_hub_download); an LLM endpoint (OPENENV_AWM_LLM_*) for some verifiers",
    ),
    "tbench2_env": EnvSpec(
        skip="downloads the Terminal-Bench 2 repo at reset (urlopen: Name or "
        "service not known); tasks run in Docker",
    ),
    "kernrl": EnvSpec(
        action=j({"code": "import torch\nclass Model(torch.nn.Module):\n    pass\n"}),
        script=[j({"code": "import torch\nclass Model(torch.nn.Module):\n    pass\n"})],
        max_turns=1,
        note="launches and steps (torch + triton, 5.5 GB venv), but kernels cannot "
        "be checked without an NVIDIA GPU: correctness FAIL on every step",
    ),
    "julia_env": EnvSpec(
        action=j({"core_code": "println(1)"}),
        skip="needs a Julia installation (not on PyPI): it launches, but every step "
        "answers 'Julia not found in PATH' (exit_code 127)",
    ),
    "browsergym_env": EnvSpec(
        skip="needs BROWSERGYM_TASK_NAME, the MiniWoB pages (MINIWOB_URL, a clone "
        "of miniwob-plusplus) and Playwright browsers (`playwright install`); "
        "without a task name its app fails at import",
    ),
    "openapp_env": EnvSpec(
        skip="does not declare openenv-core (ModuleNotFoundError: openenv at "
        "start); needs Playwright browsers and an OpenApps server (OPENAPPS_URL)",
    ),
    "dm_control_env": EnvSpec(
        skip="depends on openenv-core from git+https://github.com (no GitHub here)",
    ),
    "unity_env": EnvSpec(
        skip="depends on mlagents-envs from git+https://github.com and downloads "
        "Unity builds",
    ),
}

# The envs whose needs compatibility/recipes.py meets replace their "skipped" rows.
ENVS.update({name: EnvSpec(**spec) for name, spec in recipes.SPECS.items()})

# Failure text -> whose it is. First match wins; "env's own" means the env would fail
# the same way under OpenEnv's own client (a missing download, key, binary, a bug).
ENV_NEEDS = [
    (
        r"needs Python|python-build-standalone",
        "env's own need (a Python uv cannot find)",
    ),
    (
        r"git\+https|Failed to clone|failed to fetch.*github",
        "env's own need (a git dependency)",
    ),
    (
        r"No solution found when resolving|unsatisfiable",
        "env's own bug (unsatisfiable deps)",
    ),
    (r"OpenSpiel is not installed", "env's own need (OpenSpiel, undeclared)"),
    (
        r"has no attribute 'model_dump'",
        "env's own bug (step returns a non-Observation)",
    ),
    (r"rejected WebSocket connection: HTTP 403", "env's own (no OpenEnv /ws endpoint)"),
    (r"/schema: HTTPStatusError: Server error", "env's own bug (/schema answers 500)"),
    (
        r"dns error|Name or service not known|Temporary failure in name resolution",
        "env's own need (network)",
    ),
    (r"huggingface|hf_hub|HF_TOKEN", "env's own need (Hugging Face)"),
    (r"API_KEY|api key", "env's own need (an API key)"),
    (r"nltk|NLTK", "env's own need (NLTK data)"),
    (r"playwright|chromium|Executable doesn't exist", "env's own need (a browser)"),
    (r"SUMO_HOME", "env's own need (the SUMO simulator)"),
    (r"openenv-core 0\.2\.x", "env's own (its lock pins openenv-core 0.2.x)"),
    (r"ModuleNotFoundError: No module named", "env's own need (an undeclared module)"),
    (
        r"FACTORY_ERROR",
        "env's own? (its factory raised; the cause is only in the server log)",
    ),
    (r"Failed to build|Failed to download", "env's own need (deps)"),
]


@dataclass
class Result:
    env: str
    check: str = "-"
    eval: str = "-"
    notes: list[str] = field(default_factory=list)
    check_report: dict[str, Any] | None = None
    eval_summary: dict[str, Any] | None = None
    leftovers: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "check": self.check,
            "eval": self.eval,
            "notes": self.notes,
            "eval_summary": self.eval_summary,
            "leftovers": self.leftovers,
            "check_report": self.check_report,
        }


# ----------------------------------------------------------------- processes


class Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted(signal.Signals(signum).name)


def stop_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it lingers."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    # Also whatever is left of the group (a server the leader failed to stop).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def run_group(
    cmd: list[str], *, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> tuple[int | None, str, str, float]:
    """Run `cmd` in its own process group; (returncode or None on timeout, stdout,
    stderr, seconds). The group is stopped on return, also when interrupted."""
    out = tempfile.TemporaryFile(mode="w+")
    err = tempfile.TemporaryFile(mode="w+")
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=env,
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        try:
            code: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        stop_group(proc)
    out.seek(0)
    err.seek(0)
    return code, out.read(), err.read(), time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def policy_server(script: list[str], workdir: Path) -> Iterator[str]:
    """The local policy in script mode; yields its `/v1` URL."""
    port = free_port()
    script_file = workdir / "script.json"
    script_file.write_text(json.dumps(script))
    cmd = [sys.executable, "-m", "openenv_v1.local_policy", "--mode", "script"]
    cmd += ["--script", str(script_file), "--port", str(port)]
    log = open(workdir / "policy.log", "w")
    proc = subprocess.Popen(
        cmd, cwd=ROOT, stdout=log, stderr=log, start_new_session=True
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"local policy exited with {proc.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/v1/models", timeout=1).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("local policy not up within 60s")
            time.sleep(0.2)
        yield f"{url}/v1"
    finally:
        stop_group(proc)
        log.close()


def processes_under(*needles: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose command line contains one of `needles`,
    other than this one."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            status = (entry / "status").read_text()
        except OSError:
            continue
        if "\nState:\tZ" in status:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if raw and any(n in cmdline for n in needles):
            found.append((int(entry.name), cmdline))
    return found


def sweep(env_dir: Path, started_after: set[int]) -> list[str]:
    """Processes about this env still alive after its runs (servers under its folder
    or its prepared venv) that were not there before: reported, then stopped."""
    needles = (f"--project {env_dir}", f"{env_dir}/", env_venv_needle(env_dir))
    deadline = time.monotonic() + 10  # a server's own shutdown may take a moment
    left = []
    while time.monotonic() < deadline:
        left = [p for p in processes_under(*needles) if p[0] not in started_after]
        if not left:
            return []
        time.sleep(0.5)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    time.sleep(2)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return [f"{pid} {cmd[:200]}" for pid, cmd in left]


def env_venv_needle(env_dir: Path) -> str:
    """Part of the prepared venv's path (`uv-envs/<project name>-<hash>`)."""
    name = project_name(env_dir) or env_dir.name
    return f"uv-envs/{name}-"


def project_name(env_dir: Path) -> str | None:
    with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
        data = tomllib.loads((env_dir / "pyproject.toml").read_text())
        return data.get("project", {}).get("name")
    return None


# ----------------------------------------------------------------- check


def spec_env_vars(spec: EnvSpec, env_dir: Path) -> dict[str, str]:
    return {k: v.replace("{env}", str(env_dir)) for k, v in spec.env_vars.items()}


def find_python(env_dir: Path) -> str | None:
    """An installed interpreter meeting the env's requires-python when this one does
    not (uv looks on PATH only, and downloads otherwise: not here)."""
    from packaging.specifiers import SpecifierSet

    try:
        data = tomllib.loads((env_dir / "pyproject.toml").read_text())
        needs = SpecifierSet(data["project"]["requires-python"])
    except (OSError, KeyError, tomllib.TOMLDecodeError, ValueError):
        return None
    here = ".".join(map(str, sys.version_info[:3]))
    if here in needs:
        return None
    candidates = glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python3"))
    candidates += glob.glob("/usr/bin/python3.*[0-9]") + glob.glob(
        "/usr/local/bin/python3.*[0-9]"
    )
    for path in sorted(candidates, reverse=True):
        version = subprocess.run(
            [path, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        if version and version in needs:
            return path
    return None


def check_command(
    env_dir: Path, spec: EnvSpec, args: argparse.Namespace, web_ui: bool
) -> list[str]:
    cmd = [str(BIN / "openenv-v1"), "check", "--project-path", str(env_dir), "--json"]
    cmd += ["--reset", j(spec.reset), "--probe-sessions", "1"]
    cmd += ["--timeout", str(step_timeout(spec, args))]
    cmd += ["--launch-timeout", str(args.launch_timeout)]
    if spec.action is not None:
        cmd += ["--action", spec.action]
    kwargs = dict(args.provider_kwargs)
    if env_vars := spec_env_vars(spec, env_dir):
        kwargs["env_vars"] = env_vars
    if kwargs:
        cmd += ["--provider-kwargs", j(kwargs)]
    if web_ui:
        cmd.append("--web-ui")
    if args.docker:
        cmd.append("--use-docker")
    if args.provider:
        cmd += ["--provider", args.provider]
    return cmd


def run_check(
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    workdir: Path,
    environ: dict[str, str],
    web_ui: bool,
) -> tuple[dict[str, Any] | None, str]:
    cmd = check_command(env_dir, spec, args, web_ui)
    timeout = args.launch_timeout + 6 * step_timeout(spec, args) + 60
    code, out, err, _ = run_group(cmd, cwd=workdir, timeout=timeout, env=environ)
    if code is None:
        return None, f"check did not finish within {timeout:.0f}s (hang)"
    try:
        return json.loads(out), ""
    except ValueError:
        tail = (err or out).strip()[-800:]
        return None, f"check exited {code} without a JSON report: {tail}"


def summarize_check(report: dict[str, Any]) -> list[str]:
    notes = []
    if report.get("launch_s") is not None:
        notes.append(f"launch {report['launch_s']:.1f}s")
    app = report.get("app") or {}
    if app.get("app"):
        source = app.get("source") or ""
        source = "project.scripts" if "project.scripts" in source else source
        notes.append(f"app `{app['app']}` ({source})")
    for failed in app.get("failed") or ():
        notes.append(f"app `{failed['app']}` failed: {failed['error'][:120]}")
    if any("gradio" in w for w in report.get("warnings") or ()):
        notes.append("imports gradio without declaring it: relaunched with it")
    action = report.get("action") or {}
    if report.get("tools") is not None:
        names = [t["name"] for t in report["tools"]]
        notes.append(f"MCP, {len(names)} tools: {', '.join(names[:8])}")
    elif action.get("fields"):
        fields = [
            f"{f['name']}{'' if f['required'] else '?'}: {f['type']}"
            for f in action["fields"]
        ]
        notes.append("action " + ", ".join(fields)[:200])
    reset = report.get("reset") or {}
    # The first turn as the model sees it (`turn`; `opening` in older versions).
    opening = reset.get("turn", reset.get("opening"))
    if isinstance(opening, str):
        body = re.split(r"\n*(Reply with one action|Act by calling one tool)", opening)[
            0
        ]
        if not body.strip():
            notes.append("opening observation EMPTY")
        notes.append(f"opening {len(opening)} chars")
        if "structured_content" in opening:
            notes.append("opening shows raw `structured_content`")
    step = report.get("step")
    if step:
        reward = _round(step.get("reward"))
        notes.append(f"step reward {reward} done {step.get('done')}")
        if "structured_content" in str(step.get("turn", "")):
            notes.append("step turn shows raw `structured_content`")
    sessions = report.get("sessions") or {}
    if sessions.get("status") == "refused":
        notes.append(f"max {sessions.get('max_sessions')} sessions")
    elif sessions.get("status") == "unknown":
        notes.append(f"session probe failed: {str(sessions.get('error'))[:160]}")
    seed = report.get("seed_check") or {}
    if seed.get("status") == "differs":
        notes.append("same seed differs: " + ", ".join(seed.get("differences", [])))
    for warning in report.get("warnings") or ():
        if "seed" not in warning:
            notes.append(f"warning: {warning[:160]}")
    return notes


def classify(error: str) -> str:
    for pattern, owner in ENV_NEEDS:
        if re.search(pattern, error):
            return owner
    return "adapter?"


def short_error(failure: dict[str, Any]) -> str:
    error = failure.get("error") or ""
    # The server's output (its traceback) is in the check report; the note keeps the
    # error itself.
    error = error.split("\nthe env server's output ends with:")[0]
    first = error.split("; its output ends with:")[0]
    lines = [ln for ln in error.splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else ""
    text = first[:400]
    if last and last not in text:
        text += f" … {last[:240]}"
    return f"{failure.get('stage')}: {text}"


# ----------------------------------------------------------------- eval


def eval_command(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    policy_url: str,
    out_dir: Path,
    args: argparse.Namespace,
    web_ui: bool,
) -> list[str]:
    kwargs: dict[str, Any] = {"project_path": str(env_dir), **args.provider_kwargs}
    if env_vars := spec_env_vars(spec, env_dir):
        kwargs["env_vars"] = env_vars
    cmd = [str(BIN / "eval"), "openenv-v1", "--taskset.env", f"local/{env}"]
    cmd += ["--taskset.task.user.provider-kwargs", j(kwargs)]
    cmd += ["--taskset.resets", j([spec.reset])]
    cmd += ["--taskset.task.user.launch-timeout-s", str(args.launch_timeout)]
    cmd += ["--taskset.task.user.step-timeout-s", str(step_timeout(spec, args))]
    cmd += ["--taskset.task.user.reset-timeout-s", str(step_timeout(spec, args))]
    if web_ui:
        cmd += ["--taskset.task.user.server-web-ui", "true"]
    if args.docker:
        cmd += ["--taskset.use-docker", "true", "--taskset.docker-on-host", "true"]
    if args.provider:
        cmd += ["--taskset.provider", args.provider]
    cmd += ["--harness.id", "null", "-n", "1", "-r", "1"]
    cmd += ["--max-turns", str(spec.max_turns)]
    cmd += ["--no-push", "--no-rich", "-o", str(out_dir)]
    cmd += ["-m", "local-policy", "--client.base-url", policy_url]
    cmd += ["--client.api-key-var", KEY_VAR]
    return cmd


def run_eval(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    workdir: Path,
    environ: dict[str, str],
    web_ui: bool,
) -> tuple[str, list[str], dict[str, Any] | None]:
    out_dir = workdir / "eval"
    assert spec.script is not None
    with policy_server(spec.script, workdir) as policy:
        cmd = eval_command(env, env_dir, spec, policy, out_dir, args, web_ui)
        timeout = args.launch_timeout + spec.max_turns * step_timeout(spec, args) + 180
        code, out, err, seconds = run_group(
            cmd, cwd=workdir, timeout=timeout, env={**environ, KEY_VAR: "local"}
        )
    traces = []
    for path in sorted(out_dir.rglob("traces.jsonl")):
        traces += [json.loads(ln) for ln in path.read_text().splitlines() if ln]
    (workdir / "eval.stderr").write_text(err)
    with contextlib.suppress(OSError):
        (workdir / "traces.jsonl").write_text("".join(j(t) + "\n" for t in traces))
    if code is None:
        return "HANG", [f"eval did not finish within {timeout:.0f}s"], None
    if not traces:
        tail = (err or out).strip()[-600:]
        return "FAIL", [f"eval exited {code}, no trace: {tail}"], None
    trace = traces[0]
    summary = {
        "returncode": code,
        "seconds": round(seconds, 1),
        "stop_condition": trace.get("stop_condition"),
        "reward": _round((trace.get("rewards") or {}).get("openenv_reward")),
        "steps": (trace.get("metrics") or {}).get("openenv_steps"),
        "invalid": (trace.get("metrics") or {}).get("openenv_invalid_action_count"),
        "turns": len(trace.get("calls") or ()),
        "errors": [
            (e.get("type"), str(e.get("message"))[:600]) if isinstance(e, dict) else e
            for e in trace.get("errors") or ()
        ],
    }
    notes = [
        f"eval {summary['seconds']}s: stop `{summary['stop_condition']}`, reward "
        f"{summary['reward']}, {summary['steps']} steps, {summary['invalid']} invalid"
    ]
    first_user = first_user_text(trace)
    if first_user is not None:
        if "structured_content" in first_user:
            notes.append("model saw raw `structured_content`")
        later = all_user_texts(trace)[1:]
        if any("structured_content" in t for t in later):
            notes.append("tool results shown as raw `structured_content`")
    for kind, message in summary["errors"]:
        owner = classify(message)
        if "failed a first request" in message:
            owner = "adapter? (the shared server's first `state` request)"
        notes.append(f"{owner}: error {kind}: {message[:300]}")
    status = "ok" if code == 0 and not summary["errors"] else "FAIL"
    return status, notes, summary


def _round(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _texts(trace: dict[str, Any]) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("role") == "user":
                content = node.get("content")
                if isinstance(content, str):
                    found.append(content)
                elif isinstance(content, list):
                    found.append(
                        "\n".join(
                            p.get("text", "") for p in content if isinstance(p, dict)
                        )
                    )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(trace.get("calls") or trace)
    return found


def first_user_text(trace: dict[str, Any]) -> str | None:
    texts = _texts(trace)
    return texts[0] if texts else None


def all_user_texts(trace: dict[str, Any]) -> list[str]:
    seen: list[str] = []
    for text in _texts(trace):
        if text not in seen:
            seen.append(text)
    return seen


# ----------------------------------------------------------------- driver


def run_env(env: str, envs_dir: Path, args: argparse.Namespace) -> Result:
    env_dir = (envs_dir / env).resolve()
    spec = ENVS.get(env, EnvSpec())
    result = Result(env)
    if env not in ENVS:
        result.notes.append("not in the table: empty reset, no action, no eval")
    if spec.skip and not args.all:
        result.check = result.eval = "skipped"
        result.notes.append(f"env's own need: {spec.skip}")
        return result
    if spec.note:
        result.notes.append(spec.note)
    environ = dict(os.environ)
    with recipes.prepared(env, env_dir) as extra:
        spec = replace(spec, env_vars={**spec.env_vars, **extra.env_vars})
        environ.update(extra.environ)
        result.notes += extra.notes
        return _run_prepared(env, env_dir, spec, args, result, environ)


def _run_prepared(
    env: str,
    env_dir: Path,
    spec: EnvSpec,
    args: argparse.Namespace,
    result: Result,
    environ: dict[str, str],
) -> Result:
    if python := find_python(env_dir):
        environ["UV_PYTHON"] = python
        result.notes.append(f"UV_PYTHON={python} (requires-python)")
    before = {pid for pid, _ in processes_under(str(env_dir), env_venv_needle(env_dir))}
    with tempfile.TemporaryDirectory(prefix=f"compat-{env}-") as tmp:
        workdir = Path(tmp)
        try:
            web_ui = spec.web_ui
            report, problem = run_check(env_dir, spec, args, workdir, environ, web_ui)
            result.check_report = report
            if report is None:
                result.check = "HANG" if "hang" in problem else "FAIL"
                result.notes.append(f"adapter?: {problem}")
            else:
                result.notes += summarize_check(report)
                if report.get("ok"):
                    result.check = "ok"
                else:
                    failure = report["failure"]
                    result.check = f"FAIL ({failure.get('stage')})"
                    text = short_error(failure)
                    owner = classify(failure.get("error", ""))
                    result.notes.append(f"{owner}: {text}")
            if args.no_eval or spec.script is None:
                result.eval = "-" if spec.script is None else "not run"
            elif result.check != "ok":
                result.eval = "not run"
            else:
                status, notes, summary = run_eval(
                    env, env_dir, spec, args, workdir, environ, web_ui
                )
                result.eval, result.eval_summary = status, summary
                result.notes += notes
                if args.keep_logs:
                    keep = Path(args.keep_logs) / env
                    keep.mkdir(parents=True, exist_ok=True)
                    for name in ("eval.stderr", "policy.log", "traces.jsonl"):
                        if (workdir / name).exists():
                            (keep / name).write_text((workdir / name).read_text())
        finally:
            result.leftovers = sweep(env_dir, before)
    if result.leftovers:
        result.notes.append(
            "adapter?: left running after its runs (stopped now): "
            + "; ".join(result.leftovers)
        )
    return result


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(results: list[Result]) -> str:
    lines = ["| env | check | eval | notes |", "|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r.env} | {r.check} | {r.eval} | {cell('; '.join(r.notes))} |")
    return "\n".join(lines)


def env_names(envs_dir: Path, only: str | None) -> list[str]:
    found = sorted(
        p.name for p in envs_dir.iterdir() if (p / "pyproject.toml").is_file()
    )
    if not only:
        return found
    wanted = [n.strip() for n in only.split(",") if n.strip()]
    missing = [n for n in wanted if n not in found]
    if missing:
        raise SystemExit(f"not env folders of {envs_dir}: {', '.join(missing)}")
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs-dir", required=True, type=Path)
    parser.add_argument("--only", help="comma-separated env folder names")
    parser.add_argument("--all", action="store_true", help="also run known-skipped")
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    parser.add_argument("--no-eval", action="store_true", help="checks only")
    parser.add_argument("--launch-timeout", type=float, default=600.0)
    parser.add_argument("--step-timeout", type=float, default=30.0)
    parser.add_argument("--keep-logs", help="copy each eval's stderr here")
    parser.add_argument(
        "--docker",
        action="store_true",
        help="run each env in a container built from its own unmodified Dockerfile, "
        "on this host's Docker engine (`check --use-docker`, `eval --taskset.use-docker "
        "--taskset.docker-on-host`); needs the OpenEnv base image (in tests: "
        "`python3 -m tests.docker_engine up`)",
    )
    parser.add_argument(
        "--provider",
        help="where env servers run, as the taskset's `provider` (e.g. swarm on this "
        "host's one-node swarm: `docker swarm init --advertise-addr 127.0.0.1`)",
    )
    parser.add_argument(
        "--provider-kwargs",
        type=json.loads,
        default={},
        help='more provider options as JSON, e.g. \'{"publish": "host", "replicas": 2}\'',
    )
    args = parser.parse_args(argv)
    envs_dir = args.envs_dir.resolve()
    names = env_names(envs_dir, args.only)

    previous = {
        s: signal.signal(s, _interrupt) for s in (signal.SIGINT, signal.SIGTERM)
    }
    results: list[Result] = []
    try:
        for env in names:
            print(f"== {env}", file=sys.stderr, flush=True)
            started = time.monotonic()
            result = run_env(env, envs_dir, args)
            results.append(result)
            print(
                f"   check {result.check}, eval {result.eval} "
                f"({time.monotonic() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
    except (Interrupted, KeyboardInterrupt):
        print("interrupted: stopped what was running", file=sys.stderr)
        done = {r.env for r in results}
        results += [Result(env, "interrupted", "-") for env in names if env not in done]
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    else:
        print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
