"""A local HTTP endpoint that only this eval's own processes can use (`LocalEndpoint`).

- a unix socket in a new 0700 directory: another local user cannot connect;
- a bearer token on every request, compared in constant time: another process of
  the same user (code in an env server) cannot use it without the token, which lives
  only in our processes' memory and the environment of those verifiers starts for us;
- `POST` with `Content-Type: application/json` only, and a body cap: a web page
  cannot send such a request without a CORS preflight, which it never gets;
- a deadline for each request to arrive and a cap on open connections (more are
  closed at once); served by asyncio, so idle connections hold no thread.

Its `address` (`unix:<socket>#<token>`) is what `local_client(address)` needs. One
request per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import h11
import httpx

logger = logging.getLogger(__name__)

Handler = Callable[[str, dict[str, Any]], Awaitable[tuple[int, Mapping[str, Any]]]]
"""`handle(path, body) -> (status, reply)`: a request's path (after the leading
`/`) and its JSON object body, answered with a status and a JSON object."""

SCHEME = "unix:"
MAX_BODY = 16 << 20
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 8192


class LocalEndpoint:
    """Serves `handle` on a unix socket of its own: `start()` on the running event
    loop, `start_in_thread()` on a loop of its own."""

    def __init__(
        self,
        handle: Handler,
        *,
        name: str,
        max_connections: int = MAX_CONNECTIONS,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        max_body: int = MAX_BODY,
    ) -> None:
        self._handle = handle
        self._name = name
        self._max_connections = max_connections
        self._request_timeout_s = request_timeout_s
        self._max_body = max_body
        self.token = secrets.token_urlsafe(24)
        self._dir = _private_dir(f"openenv-v1-{name}-")
        self.socket_path = os.path.join(self._dir, f"{name}.sock")
        self._open = 0
        self._server: asyncio.AbstractServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"{SCHEME}{self.socket_path}#{self.token}"

    @property
    def open_connections(self) -> int:
        return self._open

    async def start(self) -> str:
        """Listen on the running loop; returns `address`."""
        self._loop = asyncio.get_running_loop()
        self._server = await asyncio.start_unix_server(
            self._serve, self.socket_path, backlog=self._max_connections
        )
        os.chmod(self.socket_path, 0o600)
        return self.address

    def start_in_thread(self) -> str:
        """Listen on an event loop of its own, in a daemon thread; returns `address`."""
        loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self.start())
            started.set()
            loop.run_forever()

        self._thread = threading.Thread(
            target=run, name=f"openenv-v1-{self._name}", daemon=True
        )
        self._thread.start()
        started.wait()
        return self.address

    def close(self) -> None:
        """Stop serving (from any thread) and remove the socket; idempotent."""
        server, loop, self._server = self._server, self._loop, None
        if server is not None and loop is not None:
            if self._thread is not None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(server.close)
                    loop.call_soon_threadsafe(loop.stop)
                self._thread.join(5)
            else:
                server.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    async def aclose(self) -> None:
        self.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if self._open >= self._max_connections:
            writer.close()
            return
        self._open += 1
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=16 << 10)
        try:
            try:
                async with asyncio.timeout(self._request_timeout_s):
                    request = await self._read(reader, conn)
            except TimeoutError:
                return
            if request is None:
                return
            status, reply = await self._answer(*request)
            await _respond(writer, conn, status, reply)
        except (h11.ProtocolError, ConnectionError, OSError):
            return
        finally:
            self._open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(
        self, reader: asyncio.StreamReader, conn: h11.Connection
    ) -> tuple[h11.Request, bytes] | tuple[int, str] | None:
        """The request and its body, or `(status, error)` for one refused before
        its body was read, or None when the peer left."""
        request: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data and request is None:
                    return None
                continue
            if isinstance(event, h11.Request):
                request = event
                length = _header(event, b"content-length")
                if length is not None and length.isdigit():
                    if int(length) > self._max_body:
                        return 413, "body too large"
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > self._max_body:
                    return 413, "body too large"
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None
                return request, bytes(body)
            else:  # ConnectionClosed, or PAUSED
                return None

    async def _answer(
        self, request: h11.Request | int, body: bytes | str
    ) -> tuple[int, Mapping[str, Any]]:
        if isinstance(request, int):
            return request, {"error": str(body)}
        assert isinstance(body, bytes)
        auth = (_header(request, b"authorization") or "").removeprefix("Bearer ")
        if not hmac.compare_digest(auth.encode(), self.token.encode()):
            return 401, {"error": "not authorized"}
        if request.method != b"POST":
            return 405, {"error": "POST only"}
        content_type = (_header(request, b"content-type") or "").split(";")[0]
        if content_type.strip().lower() != "application/json":
            return 415, {"error": "Content-Type must be application/json"}
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return 400, {"error": "the body is not JSON"}
        if not isinstance(data, dict):
            return 400, {"error": "the body is not a JSON object"}
        path = request.target.decode("latin-1").lstrip("/")
        try:
            return await self._handle(path, data)
        except Exception:
            logger.exception("%s endpoint: request %r failed", self._name, path)
            return 500, {"error": "internal error"}


def parse_address(address: str) -> tuple[str, str]:
    """`(socket path, token)` of a `LocalEndpoint.address`, else `ValueError`."""
    if not address.startswith(SCHEME) or "#" not in address:
        raise ValueError(f"not a local endpoint address: {address[:40]!r}")
    path, _, token = address[len(SCHEME) :].rpartition("#")
    return path, token


def local_client(address: str, timeout: float | None) -> httpx.AsyncClient:
    """An HTTP client for the endpoint at `address` (its socket, its token)."""
    path, token = parse_address(address)
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=path, verify=False),
        base_url="http://openenv-v1.local",
        headers={"Authorization": f"Bearer {token}"},
        timeout=timeout,
        trust_env=False,
    )


def _header(request: h11.Request, name: bytes) -> str | None:
    for key, value in request.headers:
        if key == name:
            return value.decode("latin-1")
    return None


async def _respond(
    writer: asyncio.StreamWriter,
    conn: h11.Connection,
    status: int,
    reply: Mapping[str, Any],
) -> None:
    data = json.dumps(reply).encode()
    headers = [
        ("content-type", "application/json"),
        ("content-length", str(len(data))),
        ("connection", "close"),
    ]
    for event in (
        h11.Response(status_code=status, headers=headers),
        h11.Data(data=data),
        h11.EndOfMessage(),
    ):
        writer.write(conn.send(event) or b"")
    await writer.drain()


def _private_dir(prefix: str) -> str:
    """A new 0700 directory whose socket path fits (~107 bytes): under TMPDIR, or
    /tmp when that is too deep."""
    path = tempfile.mkdtemp(prefix=prefix)
    if len(path) > 80:
        shutil.rmtree(path, ignore_errors=True)
        path = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    return path
