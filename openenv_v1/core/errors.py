"""Failures of the environment side, phrased for the person reading the trace.

A failure text can quote an env server, which may echo its environment: every such
text passes through `redact` with the `forward_env` values before it is raised,
logged or traced. A failure names a setting by its `setting_names` token, which the
surface that shows it renders.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import traceback
from collections.abc import Iterable
from typing import Any

from openenv_v1.core.setting_names import named_settings

logger = logging.getLogger(__name__)

_SERVER_ERROR = re.compile(
    r"Server error: (?P<message>.*) \(code: (?P<code>[A-Z_]+)\)$", re.S
)


class EnvFailure(Exception):
    """The environment could not be launched, reached, reset or stepped; `str()` is
    the whole cause, as the trace shows it once its settings are rendered."""

    @property
    def settings(self) -> tuple[str, ...]:
        """The settings the text names (`provider_kwargs.app`, `launch_timeout_s`)."""
        return named_settings(str(self))


REDACTED = "<redacted>"


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every (non-empty) value of `secrets` replaced by `<redacted>`,
    longest first (so a value containing another goes whole)."""
    for value in sorted({v for v in secrets if v}, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    return text


def setup_failure(label: str, exc: Exception, secrets: Iterable[str] = ()) -> str:
    """The cause, for the trace, of an episode that could not be opened or reset,
    redacted of `secrets`: an `EnvFailure` as it is; anything else as `<label>: setup
    failed: <what>`, logged with its traceback (call it from the `except` block)."""
    secrets = tuple(secrets)
    if isinstance(exc, EnvFailure):
        return redact(str(exc), secrets)
    logged = "".join(traceback.format_exception(exc))
    logger.error("OpenEnv setup failed\n%s", redact(logged, secrets))
    return redact(f"{label}: setup failed: {describe(exc)}", secrets)


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


_FRAME_ATTR = "_openenv_v1_error_frame"


def remember_error_frame(client: Any, data: Any) -> None:
    """Keep the `data` of an error frame `client` received (its exception keeps only
    `message` and `code`), for `server_error_text`."""
    setattr(client, _FRAME_ATTR, data or {})


def field_errors(errors: Iterable[Any], prefix: str = "", default: str = "") -> str:
    """Pydantic's errors (`loc`, `msg`), ours or a server's, as `<where>: <msg>`
    joined with `; `: `where` is `prefix` and the dotted `loc`, or `default` for an
    error with no `loc` (then only `<msg>` when `default` is '')."""
    parts = []
    for error in errors:
        if not isinstance(error, dict):
            parts.append(str(error))
            continue
        loc = ".".join(str(p) for p in error.get("loc") or ())
        where = prefix + loc if loc else default
        message = str(error.get("msg") or error.get("type") or error)
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def clear_error_frame(client: Any) -> None:
    with contextlib.suppress(AttributeError):
        delattr(client, _FRAME_ATTR)


def server_error_text(exc: BaseException, client: Any) -> str:
    """The server's message for an error frame, with the `errors` of its data (a
    `VALIDATION_ERROR`'s, `field_errors`) when it had some; the frame is then
    forgotten."""
    data = getattr(client, _FRAME_ATTR, None)
    clear_error_frame(client)
    errors = data.get("errors") if isinstance(data, dict) else None
    message = server_error_message(exc)
    if not isinstance(errors, list) or not errors:
        return message
    return f"{message} ({field_errors(errors[:10])})"
