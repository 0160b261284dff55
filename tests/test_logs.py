"""The adapter's log records reach verifiers' log handlers once, and root's once."""

import logging

import pytest

from openenv_v1.logs import OUR_LOGGER, VERIFIERS_LOGGER, route_to_verifiers


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def verifiers_handler():
    """A handler on `verifiers.v1`, as verifiers' CLI installs one; both loggers are
    put back as they were afterwards."""
    ours, theirs = logging.getLogger(OUR_LOGGER), logging.getLogger(VERIFIERS_LOGGER)
    saved = [(lg, lg.handlers[:], lg.level) for lg in (ours, theirs)]
    collect = Collect()
    theirs.addHandler(collect)
    theirs.setLevel(logging.INFO)
    ours.setLevel(logging.NOTSET)
    try:
        yield collect
    finally:
        for lg, handlers, level in saved:
            lg.handlers[:], lg.level = handlers, level


def test_records_reach_verifiers_handlers_and_root_once_each(verifiers_handler, caplog):
    route_to_verifiers()
    route_to_verifiers()
    caplog.set_level(logging.DEBUG)
    log = logging.getLogger("openenv_v1.core.launch.pool")
    log.info("server up")
    log.debug("too fine for verifiers' INFO")
    assert verifiers_handler.messages == ["server up"]
    assert [r.getMessage() for r in caplog.records if r.name == log.name] == [
        "server up"
    ]


def test_our_logger_takes_verifiers_level_unless_set():
    ours = logging.getLogger(OUR_LOGGER)
    theirs = logging.getLogger(VERIFIERS_LOGGER)
    saved = [(lg, lg.handlers[:], lg.level) for lg in (ours, theirs)]
    try:
        theirs.setLevel(logging.DEBUG)
        ours.setLevel(logging.NOTSET)
        route_to_verifiers()
        assert ours.level == logging.DEBUG
        ours.setLevel(logging.ERROR)
        route_to_verifiers()
        assert ours.level == logging.ERROR
    finally:
        for lg, handlers, level in saved:
            lg.handlers[:], lg.level = handlers, level
