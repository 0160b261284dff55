"""The one readiness wait every launcher, `openenv-v1` and the tests use
(`core/launch/readiness.py`), against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from openenv_v1.core.launch.readiness import ServerGone, client_host, wait_ready


@contextlib.contextmanager
def server(statuses: list[int]) -> Iterator[tuple[str, list[str]]]:
    """A server answering each request with the next of `statuses` (the last one
    repeated); yields its base URL and the paths asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(statuses[min(len(asked), len(statuses)) - 1])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", asked
    finally:
        httpd.shutdown()
        httpd.server_close()


def slow() -> Exception:
    return TimeoutError("not ready: raise launch_timeout_s")


def test_it_polls_until_the_url_answers_200():
    with server([503, 404, 200]) as (url, asked):
        wait_ready(f"{url}/health", timeout_s=30, not_ready=slow, interval_s=0.01)
    assert asked == ["/health"] * 3


def test_what_answers_is_the_callers_choice():
    with server([503, 404]) as (url, asked):
        wait_ready(url, timeout_s=30, not_ready=slow, answers=lambda s: s < 500)
    assert len(asked) == 2


def test_a_server_that_never_answers_fails_with_the_callers_error():
    with server([503]) as (url, asked):
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="raise launch_timeout_s"):
            wait_ready(url, timeout_s=0.3, not_ready=slow, interval_s=0.05)
        assert time.monotonic() - started >= 0.3
    assert asked  # polled until the end
    with pytest.raises(TimeoutError):  # no time at all: one poll still
        wait_ready("http://127.0.0.1:1", timeout_s=0, not_ready=slow)


def test_a_server_gone_ends_the_wait_at_once_or_with_its_own_error():
    with server([503]) as (url, asked):
        with pytest.raises(ServerGone):
            wait_ready(url, timeout_s=30, not_ready=slow, running=lambda: False)
        assert not asked

        def exited() -> bool:
            raise RuntimeError("exited with code 3")

        with pytest.raises(RuntimeError, match="exited with code 3"):
            wait_ready(url, timeout_s=30, not_ready=slow, running=exited)


def test_running_is_asked_at_most_every_check_every_s():
    checks: list[float] = []

    def running() -> bool:
        checks.append(time.monotonic())
        return True

    with server([503]) as (url, asked):
        with pytest.raises(TimeoutError):
            wait_ready(
                url,
                timeout_s=1.0,
                not_ready=slow,
                running=running,
                check_every_s=0.4,
                interval_s=0.02,
            )
    assert 1 <= len(checks) <= 3 < len(asked)


def test_a_wildcard_bind_address_is_reached_on_loopback():
    assert client_host("0.0.0.0") == client_host("::") == "127.0.0.1"
    assert client_host("127.0.0.2") == "127.0.0.2"
