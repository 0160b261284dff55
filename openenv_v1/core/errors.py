"""Failures of the environment side, phrased for the person reading the trace."""

from __future__ import annotations

import errno
import logging
import re

logger = logging.getLogger(__name__)

_SERVER_ERROR = re.compile(
    r"Server error: (?P<message>.*) \(code: (?P<code>[A-Z_]+)\)$", re.S
)


class EnvFailure(Exception):
    """The environment could not be launched, reached, reset or stepped.

    `str(failure)` is the complete, human-readable cause (URL, errno, the server's own
    message or stderr tail); it is what lands on the trace.
    """


def setup_failure(label: str, exc: Exception) -> str:
    """The cause, for the trace, of an episode that could not be opened or reset: an
    `EnvFailure` as it is; anything else, unexpected, as `<label>: setup failed:
    <what>` (logged with its traceback; call it from the `except` block)."""
    if isinstance(exc, EnvFailure):
        return str(exc)
    logger.exception("OpenEnv setup failed")
    return f"{label}: setup failed: {describe(exc)}"


def server_error_code(exc: BaseException) -> str | None:
    """The OpenEnv wire error code (`VALIDATION_ERROR`, `CAPACITY_REACHED`, ...) of a
    client exception, or None when the exception did not come from an error frame."""
    match = _SERVER_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
    return match["code"] if match else None


def server_error_message(exc: BaseException) -> str:
    match = _SERVER_ERROR.match(str(exc))
    return match["message"] if match else str(exc)


def describe(exc: BaseException) -> str:
    """One line naming what went wrong, with the errno name for OS-level failures
    (an `EnvFailure` is its own text: it names the cause already)."""
    if isinstance(exc, EnvFailure):
        return str(exc)
    parts = [f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__]
    cause = exc.__cause__ or exc.__context__
    seen = {id(exc)}
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        code = getattr(cause, "errno", None)
        if isinstance(code, int) and code in errno.errorcode:
            parts.append(f"[{errno.errorcode[code]}] {cause}")
            break
        cause = cause.__cause__ or cause.__context__
    return " ".join(parts)
