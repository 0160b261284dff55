"""The package alone: build the wheel, install it into fresh virtual environments
outside the repository, and run `openenv-v1` there as a user who installed it would.

    uv run python -m tests.wheel_demo           # what .ci/run runs
    uv run python -m tests.wheel_demo --keep    # leave the environments for a look

Three environments, each installed from the registries (uv's cache) with this
checkout's `uv.lock` versions as constraints (`uv export --frozen`), so they resolve
the packages the lock holds:

- no extra: `openenv-v1 demo` and `openenv-v1 check` exit 1 and name the extras to
  install;
- `[vf02]` (verifiers 0.2, openenv 0.10) and `[vf04]` (verifiers 0.4, openenv-core
  0.3): `openenv-v1 demo` solves its games with the Wordle env the wheel ships, from
  a working directory outside the repository. The two demos run side by side.

Exits 0 when every leg passed, 1 (after printing what each one printed) otherwise.
Every process it starts is stopped before it exits, on SIGTERM and Ctrl-C too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

from openenv_v1.core.launch.process_group import die_with_owner

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("vf02", "vf04")
EPISODES = 2
DEMO_TIMEOUT_S = 300.0
NO_EXTRA_TIMEOUT_S = 60.0
T = TypeVar("T")
INSTALL_HINTS = ("pip install 'openenv-v1[vf02]'", "pip install 'openenv-v1[vf04]'")


class Failed(Exception):
    """A leg did not do what a user of the wheel needs."""


@dataclass
class Demo:
    extra: str
    proc: subprocess.Popen[str]
    log: Path
    started: float


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the environments")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="openenv-v1-wheel-"))
    started = time.monotonic()
    outcome, code = "interrupted", 130
    try:
        with _stopped_on_signals():
            _legs(work)
        outcome, code = "passed", 0
    except Failed as e:
        print(f"wheel_demo: FAILED: {e}", file=sys.stderr)
        outcome, code = "failed", 1
    except KeyboardInterrupt:
        pass
    finally:
        if args.keep:
            print(f"wheel_demo: environments kept under {work}")
        else:
            # ~50,000 files: seconds of disk time, part of the step's cost.
            _timed("remove the environments", lambda: shutil.rmtree(work, True))
        print(f"wheel_demo: {outcome} in {time.monotonic() - started:.1f}s")
    return code


def _legs(work: Path) -> None:
    wheel = _timed("build the wheel", lambda: _build(work))
    pythons = {
        leg: _timed(
            f"install {_spec(wheel, leg)}",
            lambda leg=leg: _install(work, wheel, leg),
        )
        for leg in ("", *EXTRAS)
    }
    _timed(
        "no extra: every command names the extras",
        lambda: _no_extra(pythons[""], work),
    )
    _timed(
        f"demo from the wheel, {' and '.join(EXTRAS)} side by side",
        lambda: _demos({e: pythons[e] for e in EXTRAS}, work),
    )


@contextmanager
def _stopped_on_signals() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, through the `finally` blocks that stop children."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _timed(what: str, step: Callable[[], T]) -> T:
    began = time.monotonic()
    result = step()
    print(f"wheel_demo: {what}: {time.monotonic() - began:.1f}s", flush=True)
    return result


def _run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise Failed(
            f"`{' '.join(argv)}` exited {proc.returncode}:\n{proc.stderr[-3000:]}"
        )
    return proc


def _build(work: Path) -> Path:
    dist = work / "dist"
    _run(["uv", "build", "--wheel", "--quiet", "-o", str(dist)], cwd=ROOT)
    (wheel,) = dist.glob("openenv_v1-*.whl")
    return wheel


def _spec(wheel: Path, extra: str) -> str:
    return f"{wheel.name}[{extra}]" if extra else wheel.name


def _install(work: Path, wheel: Path, extra: str) -> Path:
    """A fresh venv holding the wheel (with `extra`), the lock's versions as
    constraints; returns its Python."""
    name = extra or "no-extra"
    constraints = work / f"{name}-constraints.txt"
    export = ["uv", "export", "--frozen", "--no-hashes", "--no-emit-project"]
    export += ["--no-default-groups", *(["--extra", extra] if extra else [])]
    _run([*export, "-o", str(constraints), "--quiet"], cwd=ROOT)
    venv = work / name
    _run(["uv", "venv", "--quiet", "--python", sys._base_executable, str(venv)])
    python = venv / "bin" / "python"
    spec = f"{wheel}[{extra}]" if extra else str(wheel)
    install = ["uv", "pip", "install", "--quiet", "--python", str(python)]
    _run([*install, "-c", str(constraints), spec], env=_clean_environ())
    return python


def _clean_environ() -> dict[str, str]:
    """This process's environment without what points into the repository's venvs."""
    drop = ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _no_extra(python: Path, work: Path) -> None:
    cli = str(python.parent / "openenv-v1")
    for command in (["demo"], ["check", "--base-url", "http://127.0.0.1:9"]):
        proc = subprocess.run(
            [cli, *command],
            cwd=work,
            env=_clean_environ(),
            capture_output=True,
            text=True,
            timeout=NO_EXTRA_TIMEOUT_S,
        )
        said = proc.stdout + proc.stderr
        if proc.returncode != 1 or not all(hint in said for hint in INSTALL_HINTS):
            raise Failed(
                f"`openenv-v1 {' '.join(command)}` with no extra exited "
                f"{proc.returncode} without naming both extras; it printed:\n{said}"
            )
        print(f"wheel_demo: no extra, openenv-v1 {command[0]}: {said.strip()}")


def _demos(pythons: dict[str, Path], work: Path) -> None:
    """Start one demo per extra (from this thread: their parent-death signal follows
    it), wait for all, then judge each by its summary."""
    demos: list[Demo] = []
    try:
        for extra, python in pythons.items():
            _import_from_venv(python)
            cwd = work / f"{extra}-run"
            cwd.mkdir()
            log = work / f"{extra}-demo.log"
            command = [
                str(python.parent / "openenv-v1"),
                "demo",
                *("--episodes", str(EPISODES), "--concurrency", str(EPISODES)),
            ]
            with log.open("w") as out:
                proc = subprocess.Popen(
                    command,
                    cwd=cwd,
                    env=_clean_environ(),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    text=True,
                    preexec_fn=die_with_owner,
                )
            demos.append(Demo(extra, proc, log, time.monotonic()))
        problems = [p for demo in demos if (p := _judge(demo))]
    finally:
        for demo in demos:
            _stop(demo.proc)
    if problems:
        raise Failed("\n\n".join(problems))


def _import_from_venv(python: Path) -> None:
    """The venv finds the package and its Wordle env in its own site-packages, not in
    this checkout (looked up, not imported: that is the demo's job)."""
    probe = (
        "from importlib.util import find_spec as f; "
        "print(f('openenv_v1').origin, f('wordle_env').origin)"
    )
    out = _run([str(python), "-c", probe], cwd=python.parent, env=_clean_environ())
    found = out.stdout
    if str(ROOT) in found or found.count(f"{python.parents[1]}/lib/") != 2:
        raise Failed(f"{python} finds the package outside its venv: {found}")


def _judge(demo: Demo) -> str | None:
    """None if `demo` solved its games and exited 0, else what went wrong."""
    try:
        code = demo.proc.wait(
            timeout=max(1.0, DEMO_TIMEOUT_S - (time.monotonic() - demo.started))
        )
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - demo.started
    out = demo.log.read_text(errors="replace")
    summary = (
        out[out.find("openenv-v1 demo summary") :]
        if "openenv-v1 demo summary" in out
        else ""
    )
    solved = f"solved        {EPISODES}/{EPISODES} (reward >= 1)" in summary
    if code == 0 and solved:
        print(
            f"wheel_demo: [{demo.extra}] demo passed in {took:.1f}s:\n{summary.rstrip()}"
        )
        return None
    return f"[{demo.extra}] demo exited {code} after {took:.1f}s; it printed:\n{out[-4000:]}"


def _stop(proc: subprocess.Popen[str]) -> None:
    """SIGINT first (the demo stops what it started), then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=45)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
