"""Waiting for a started server to answer, and the address a client reaches it at.

Every launcher, the `openenv-v1` command and the tests wait the same way:
`wait_ready` polls one URL (an env server's `/health`) with one HTTP client while the
caller's `running()` says the server is there; each caller says what "gone" and "too
slow" mean in its own words, naming the cause and the setting to raise. `client_host`
maps a server's bind address to one a client on this host connects to.

    wait_ready(f"{url}/health", timeout_s=target.launch_timeout_s,
               running=lambda: process.poll() is None,
               not_ready=lambda: EnvFailure("... raise launch_timeout_s ..."))
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from openenv_v1.core.http_client import shared_tls

__all__ = ["ServerGone", "client_host", "wait_ready"]


class ServerGone(Exception):
    """`running()` said the server is gone before it answered."""


def _ok(status: int) -> bool:
    return status == 200


def wait_ready(
    url: str,
    *,
    timeout_s: float,
    not_ready: Callable[[], Exception],
    running: Callable[[], bool] = lambda: True,
    check_every_s: float = 0.0,
    interval_s: float = 0.1,
    answers: Callable[[int], bool] = _ok,
) -> None:
    """Poll `url` every `interval_s` until its status passes `answers` (200 by
    default), for at most `timeout_s` (one poll at least); then raise `not_ready()`.

    Before a poll, at most every `check_every_s` (a `docker inspect` is not free),
    `running()` is asked: False raises `ServerGone`, and an exception of its own
    (naming how the server ended) passes through as it is."""
    next_check = time.monotonic() + check_every_s
    with httpx.Client(timeout=2.0, trust_env=False, verify=shared_tls()) as http:

        def answered() -> bool:
            nonlocal next_check
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + check_every_s
                if not running():
                    raise ServerGone(url)
            try:
                return answers(http.get(url).status_code)
            except httpx.HTTPError:
                return False

        retrying = Retrying(
            stop=stop_after_delay(timeout_s),
            wait=wait_fixed(interval_s),
            retry=retry_if_result(lambda ok: not ok),
        )
        try:
            retrying(answered)
        except RetryError:
            raise not_ready() from None


def client_host(host: str) -> str:
    """The address a client on this host reaches a server bound to `host` at:
    loopback for the wildcard addresses, `host` itself otherwise."""
    return "127.0.0.1" if host in {"0.0.0.0", "::"} else host
