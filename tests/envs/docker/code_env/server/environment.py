"""Run the Python code of each step in a process of its own, as envs that execute
model-written code do (coding_env, repl_env). One step per episode; reward 1.0 when
the code exits 0.

The code runs in a new process group, killed whole after `CODE_TIMEOUT_S` (default
10). What killed it is said in words: a timeout, a signal (SIGKILL is what the
kernel's out-of-memory killer sends under the container's memory limit), or a failed
fork (the container's pids limit). The code is the out-of-memory killer's first
choice (`oom_score_adj` 1000), so a memory hog dies and the server lives on."""

import os
import signal
import subprocess
import time
from typing import Any

from models import CodeAction, CodeObservation
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

OUTPUT_CHARS = 2000


def _first_to_go() -> None:
    """Make the code the out-of-memory killer's first choice, not this server (raising
    one's own score needs no privilege)."""
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("1000")


def _kill_group(pgid: int) -> None:
    """SIGKILL the group until it is empty (a fork bomb forks while it is killed)."""
    for _ in range(50):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.05)


class CodeEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> CodeObservation:
        self._state = State(episode_id=episode_id)
        return CodeObservation(
            message='Send Python code as {"code": "..."}; it runs once, and exit '
            "status 0 pays 1.0.",
            done=False,
            reward=0.0,
        )

    def step(
        self, action: CodeAction, timeout_s: float | None = None, **kwargs: Any
    ) -> CodeObservation:
        self._state.step_count += 1
        limit = float(os.environ.get("CODE_TIMEOUT_S", "10"))
        try:
            process = subprocess.Popen(
                ["python3", "-c", action.code],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_first_to_go,
            )
        except OSError as e:
            return self._end(f"could not start the code: {e}", "", None)
        try:
            output, _ = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            output, _ = process.communicate()
            return self._end(
                f"the code ran longer than {limit:.0f}s and was killed with all its "
                "processes",
                output,
                process.returncode,
            )
        _kill_group(process.pid)  # anything it left running
        code = process.returncode
        text = output.decode(errors="replace")
        if code < 0:
            name = signal.Signals(-code).name
            why = " (the out-of-memory killer?)" if name == "SIGKILL" else ""
            message = f"the code was killed by {name}{why}"
        elif "Resource temporarily unavailable" in text:
            message = f"the code exited with {code}: it could not fork (pids limit)"
        else:
            message = f"the code exited with {code}"
        return self._end(message, output, code)

    def _end(
        self, message: str, output: bytes | str, code: int | None
    ) -> CodeObservation:
        if isinstance(output, bytes):
            output = output.decode(errors="replace")
        return CodeObservation(
            message=message,
            stdout=output[-OUTPUT_CHARS:],
            exit_code=code,
            done=True,
            reward=1.0 if code == 0 else 0.0,
        )

    @property
    def state(self) -> State:
        return self._state
