"""Whose fault a refused step is: the model's (an illegal move) or the env's (a bug).

OpenEnv answers any exception a step raises with an `EXECUTION_ERROR` carrying only
its text, and keeps the session, so an illegal move and a bug in the env arrive
alike. `env_is_broken` knows the phrasings of Python's own errors, which no env
raises on purpose; anything else, on a session that still answers, is the model's
invalid action. `step_refusal` is the one reading of a step that raised;
`illegal_action` checks an action against the observation's `legal_actions` before
stepping, so an illegal move costs no step.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

from openenv_v1.core.episode.replay import ResumeFailed
from openenv_v1.core.episode.resume import SessionClosed, session_closed
from openenv_v1.core.episode.schema import ActionSpec
from openenv_v1.core.errors import (
    describe,
    server_error_code,
    server_error_message,
    server_error_text,
)

_PYTHON_ERRORS = re.compile(
    r"object has no attribute"
    r"|object is not (subscriptable|callable|iterable)"
    r"|unexpected keyword argument"
    r"|missing \d+ required (positional|keyword-only) argument"
    r"|name '[^']+' is not defined"
    r"|not supported between instances of"
    r"|unsupported operand type"
    r"|cannot import name"
    r"|No module named"
    r"|maximum recursion depth"
    r"|Object of type \S+ is not JSON serializable"
)

LEGAL_KEYS = ("legal_actions", "legal_moves", "valid_actions", "available_actions")
"""Observation fields read as the list of legal action ids."""


def env_is_broken(message: str) -> bool:
    """Whether an `EXECUTION_ERROR` message is one of Python's own errors, which say
    the env's code is broken rather than the action illegal."""
    return bool(_PYTHON_ERRORS.search(message))


def _integer_field(spec: ActionSpec) -> str | None:
    """The action's only required integer field (`action_id`), if it has one."""
    if spec.is_mcp:
        return None
    ints = [
        name
        for name in spec.required
        if isinstance(spec.fields.get(name), dict)
        and spec.fields[name].get("type") == "integer"
    ]
    return ints[0] if len(ints) == 1 else None


def illegal_action(
    action: dict[str, Any], spec: ActionSpec, observation: dict[str, Any]
) -> str | None:
    """Why `action` is not among the legal actions the last observation lists, or
    None (legal, or nothing to check against)."""
    name = _integer_field(spec)
    if name is None or not isinstance(observation, dict):
        return None
    for key in LEGAL_KEYS:
        legal = observation.get(key)
        if isinstance(legal, list) and legal and all(type(v) is int for v in legal):
            value = action.get(name)
            if value in legal:
                return None
            shown = ", ".join(str(v) for v in legal[:50])
            more = f", ... ({len(legal)} in all)" if len(legal) > 50 else ""
            return f"{name}={value!r} is not one of the observation's {key} [{shown}{more}]"
    return None


@dataclass(frozen=True)
class StepRefusal:
    """A step that raised: the model's `invalid` action (told `problem`), or the
    end of the episode (`problem` its cause)."""

    invalid: bool
    problem: str


async def step_refusal(e: Exception, client: Any, timeout_s: float) -> StepRefusal:
    """What a step that raised `e` means: the server's refusal of the action is an
    invalid action (`VALIDATION_ERROR`, or an `EXECUTION_ERROR` the session
    `survives`); anything else ends the episode."""
    if isinstance(e, TimeoutError):
        return StepRefusal(False, f"step did not answer within {timeout_s:.0f}s")
    if isinstance(e, ResumeFailed | SessionClosed):
        return StepRefusal(False, str(e))
    code = server_error_code(e)
    if code == "VALIDATION_ERROR":
        text = server_error_text(e, client)
        return StepRefusal(True, f"the server rejected it: {text}")
    if code == "EXECUTION_ERROR" and await survives(e, client, timeout_s):
        text = server_error_message(e)
        return StepRefusal(True, f"the environment refused it: {text}")
    if code is not None:
        text = f"step failed on the server ({code}): {server_error_message(e)}"
        return StepRefusal(False, text)
    return StepRefusal(False, f"step failed: {describe(e)}")


async def survives(exc: BaseException, client: Any, timeout_s: float) -> bool:
    """Whether an `EXECUTION_ERROR` on a step is the model's to fix: the env's code
    is not plainly broken (`env_is_broken`) and the session still answers (a `state`
    message). OpenSpiel raises on an occupied cell; a step that returns the wrong
    type is the env's bug."""
    if env_is_broken(server_error_message(exc)) or session_closed(client):
        return False
    try:
        async with asyncio.timeout(timeout_s):
            await client.state()
    except Exception as e:
        # An env whose `state` raises still answered: the session is alive.
        return server_error_code(e) is not None
    return True
