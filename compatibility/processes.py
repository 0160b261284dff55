"""The processes of the compatibility run: each command in its own process group,
stopped when done (also on a timeout or an interrupt), the local scripted policy,
and the sweep for processes an env left running."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "Interrupted",
    "interrupt",
    "policy_server",
    "processes_under",
    "run_group",
    "sweep",
    "env_venv_needle",
]

ROOT = Path(__file__).resolve().parent.parent


class Interrupted(Exception):
    pass


def interrupt(signum: int, frame: Any) -> None:
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
