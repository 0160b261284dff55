"""The lease desk of a `base_url` list (`url_pool.UrlPool`): sessions spread over
running servers by what each holds, a lost server taken out and back once its
`/health` answers, in process and over the desk's endpoint."""

import asyncio
import contextlib
import http.server
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from openenv_v1.core import EnvTarget, EpisodeLimits, open_episode
from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.leases import PoolClient
from openenv_v1.core.launch.target import open_env
from openenv_v1.core.launch.url_pool import UrlPool
from tests.servers import (
    TEST_ENVS,
    WORDLE_APP,
    free_port,
    uvicorn_server,
    wait_until,
)


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        up = self.path == "/health" and self.server.up  # type: ignore[attr-defined]
        self.send_response(200 if up else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def health_server() -> Iterator[http.server.ThreadingHTTPServer]:
    """A server on 127.0.0.1 whose `/health` answers 200 while its `up` is true
    (503 otherwise); its `url` is where it listens."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    server.up = True  # type: ignore[attr-defined]
    server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


async def lease_urls(desk: UrlPool, count: int) -> list[str]:
    """`count` leases held at once, their sessions accepted: each one's server."""
    urls = []
    for _ in range(count):
        lease, url = await desk.lease_async()
        desk.confirm(lease)
        urls.append(url)
    return urls


async def test_sessions_spread_over_the_servers_fewest_leases_first():
    desk = UrlPool(["http://127.0.0.1:1", "http://127.0.0.1:2/", "http://127.0.0.1:3"])
    try:
        urls = await lease_urls(desk, 7)
        assert Counter(urls) == {
            "http://127.0.0.1:1": 3,
            "http://127.0.0.1:2": 2,
            "http://127.0.0.1:3": 2,
        }
    finally:
        desk.close()


async def test_a_refused_session_caps_its_server_at_the_sessions_it_held():
    a, b = "http://127.0.0.1:1", "http://127.0.0.1:2"
    desk = UrlPool([a, b])
    try:
        assert await lease_urls(desk, 2) == [a, b]
        refused, url = await desk.lease_async()
        assert url == a
        # `a` answered CAPACITY_REACHED: it holds one; the lease goes to `b`.
        _, url = await desk.lease_async(rejected=refused)
        assert url == b
        assert desk.capacities() == {a: 1, b: None}
        assert set(await lease_urls(desk, 3)) == {b}
    finally:
        desk.close()


async def test_every_server_full_waits_then_fails_naming_the_servers():
    desk = UrlPool(["http://127.0.0.1:1"], sessions_per_server=1, capacity_wait_s=0.3)
    try:
        await lease_urls(desk, 1)
        with pytest.raises(EnvFailure, match=r"session limit .*127\.0\.0\.1:1 1"):
            await desk.lease_async()
    finally:
        desk.close()


async def test_one_session_at_a_time_goes_round_the_servers():
    urls = ["http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"]
    desk = UrlPool(urls)
    try:
        seen = []
        for _ in range(6):
            lease, url = await desk.lease_async()
            desk.confirm(lease)
            desk.release(lease)
            seen.append(url)
        assert seen == urls + urls
    finally:
        desk.close()


async def test_a_session_ending_lets_a_waiting_lease_in():
    desk = UrlPool(["http://127.0.0.1:1"], sessions_per_server=1, capacity_wait_s=30)
    try:
        lease, _ = await desk.lease_async()
        waiting = asyncio.ensure_future(desk.lease_async())
        await asyncio.sleep(0)
        assert not waiting.done()
        desk.release(lease)
        _, url = await asyncio.wait_for(waiting, 10)
        assert url == "http://127.0.0.1:1"
    finally:
        desk.close()


async def test_a_session_ending_wakes_one_waiting_lease_and_a_cancelled_one_passes_it_on(
    monkeypatch,
):
    desk = UrlPool(["http://127.0.0.1:1"], sessions_per_server=1, capacity_wait_s=30)
    tries = 0
    own_try = desk._try_lease_locked

    def counted(pid, wait):
        nonlocal tries
        tries += 1
        return own_try(pid, wait)

    monkeypatch.setattr(desk, "_try_lease_locked", counted)
    woken: list[int] = []

    async def wait_in_line(i: int) -> str:
        lease, _ = await desk.lease_async()
        woken.append(i)
        return lease

    held, _ = await desk.lease_async()
    waiting = [asyncio.ensure_future(wait_in_line(i)) for i in range(200)]
    try:
        while tries < 201:  # every one tried once, and waits in line
            await asyncio.sleep(0.01)
        tries = 0
        # The first in line is woken, then cancelled before it runs: its turn goes
        # to the next; the one seat lets exactly one lease in.
        desk.release(held)
        waiting[0].cancel()
        await asyncio.wait_for(waiting[1], 5)
        assert woken == [1] and desk.leases_held() == 1
        # Each seat freed costs a try or two, not one per waiting lease.
        for i in range(2, 12):
            desk.release(waiting[i - 1].result())
            await asyncio.wait_for(waiting[i], 5)
        assert woken == list(range(1, 12))
        assert tries < 3 * 11
    finally:
        for w in waiting:
            w.cancel()
        desk.close()


async def test_a_lost_server_is_taken_out_and_back_once_its_health_answers():
    with health_server() as lost, health_server() as other:
        desk = UrlPool([lost.url, other.url])
        try:
            lease, url = await desk.lease_async()
            assert url == lost.url
            lost.up = False
            desk.release(lease, lost=True)
            assert desk.servers() == [other.url]
            assert set(await lease_urls(desk, 3)) == {other.url}
            lost.up = True
            assert await asyncio.to_thread(
                wait_until, lambda: desk.servers() == [lost.url, other.url], 15
            )
            _, url = await desk.lease_async()
            assert url == lost.url
        finally:
            desk.close()


async def test_an_unreachable_lease_is_taken_out_and_the_next_goes_elsewhere():
    with health_server() as other:
        down = f"http://127.0.0.1:{free_port()}"  # nothing listens: refused
        desk = UrlPool([down, other.url], return_wait_s=60)
        try:
            lease, url = await desk.lease_async()
            assert url == down
            _, url = await desk.lease_async(unreachable=lease)
            assert url == other.url and desk.servers() == [other.url]
        finally:
            desk.close()


async def test_every_server_out_fails_naming_them():
    down = f"http://127.0.0.1:{free_port()}"
    desk = UrlPool([down], capacity_wait_s=0.3)
    try:
        lease, _ = await desk.lease_async()
        with pytest.raises(EnvFailure, match=rf"{down}\) could be reached"):
            await desk.lease_async(unreachable=lease)
    finally:
        desk.close()


async def test_leases_of_a_process_that_is_gone_are_reclaimed():
    desk = UrlPool(["http://127.0.0.1:1"], sessions_per_server=1, capacity_wait_s=30)
    try:
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        await desk.lease_async(pid=child.pid)
        _, url = await asyncio.wait_for(desk.lease_async(), 10)
        assert url == "http://127.0.0.1:1"
    finally:
        desk.close()


async def test_leases_over_the_desks_endpoint():
    desk = UrlPool(["http://127.0.0.1:1", "http://127.0.0.1:2"])
    try:
        client = PoolClient(desk.serve_http())
        first, url = await client.lease(rejected=None, unreachable=None)
        await client.confirm(first)
        _, second = await client.lease(rejected=None, unreachable=None)
        assert {url, second} == {"http://127.0.0.1:1", "http://127.0.0.1:2"}
        await client.release(first)
        assert desk.leases_held() == 1
    finally:
        desk.close()


async def test_a_real_servers_capacity_reached_sends_the_session_to_another():
    """Real Wordle servers: one holds a single session; the third session, first
    sent to it, is refused there and opened on the other."""
    with (
        uvicorn_server(WORDLE_APP, env={"WORDLE_MAX_SESSIONS": "1"}) as one,
        uvicorn_server(WORDLE_APP) as roomy,
    ):
        desk = UrlPool([one, roomy])
        target = EnvTarget(base_urls=desk.urls, pool=desk.local())
        try:
            async with contextlib.AsyncExitStack() as stack:
                clients = [await open_env(target, stack) for _ in range(3)]
                assert [c.base_url for c in clients] == [one, roomy, roomy]
                assert desk.capacities() == {one: 1, roomy: None}
        finally:
            desk.close()


async def test_the_episodes_after_the_first_on_a_server_take_its_contract_from_it():
    """Six episodes over two running servers, in one process: each server's
    `/schema` is read by the first episode on it only, and every episode plays on
    the same checked contract; a server released as lost is forgotten."""
    with contextlib.ExitStack() as servers:
        urls = [
            servers.enter_context(
                uvicorn_server("counted_wordle:app", app_dir=TEST_ENVS)
            )
            for _ in range(2)
        ]
        desk = UrlPool(urls)
        leases = desk.local()
        target = EnvTarget(base_urls=urls, pool=leases)
        try:
            async with contextlib.AsyncExitStack() as stack:
                episodes = [
                    await open_episode(target, EpisodeLimits(), stack) for _ in range(6)
                ]
                for episode in episodes:
                    await episode.reset({"word": "crane"})
                    await episode.act("[crane]")
            reads = [httpx.get(f"{url}/test/schema_reads").json() for url in urls]
            sessions = [httpx.get(f"{url}/test/sessions").json() for url in urls]
            assert leases.contracts is not None
            lease, lost = await leases.lease(rejected=None, unreachable=None)
            await leases.release(lease, lost=True)
        finally:
            desk.close()
    assert (reads, sessions) == ([1, 1], [3, 3])
    assert all(e.report.reward == 1.0 and e.report.done for e in episodes)
    assert len({id(e.spec) for e in episodes}) == 2  # one contract a server
    assert leases.contracts.get(lost) is None
    assert leases.contracts.get(next(u for u in urls if u != lost)) is not None
