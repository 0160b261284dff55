"""Our log records, shown where verifiers shows its own: verifiers' CLIs route only
the `verifiers.v1` logger (to the console and the run's `eval.log`); an
`openenv_v1.*` record would reach at most Python's last-resort stderr handler.
"""

from __future__ import annotations

import logging

VERIFIERS_LOGGER = "verifiers.v1"
OUR_LOGGER = "openenv_v1"


class _ToVerifiers(logging.Handler):
    """Passes each record to the `verifiers.v1` logger's own handlers only: the record
    still propagates up from our logger, so going through verifiers' ancestors too
    would deliver it twice wherever the root logger has a handler."""

    def emit(self, record: logging.LogRecord) -> None:
        target = logging.getLogger(VERIFIERS_LOGGER)
        if record.levelno < target.getEffectiveLevel():
            return
        for handler in target.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


def route_to_verifiers() -> None:
    """Send `openenv_v1.*` records where verifiers sends its own; idempotent. Our
    logger takes verifiers' level unless one was set for it explicitly."""
    ours = logging.getLogger(OUR_LOGGER)
    if not any(isinstance(h, _ToVerifiers) for h in ours.handlers):
        ours.addHandler(_ToVerifiers())
    if ours.level == logging.NOTSET:
        ours.setLevel(logging.getLogger(VERIFIERS_LOGGER).getEffectiveLevel())
