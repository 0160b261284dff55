"""The local Wordle env, whose server can be made busy: `GET /test/spin/<seconds>`
answers at once, then holds the server's event loop in a CPU loop for that long, so
nothing else (`/health` included) is answered meanwhile while its process runs, as a
server swamped by a burst of sessions on a loaded host would."""

import time
from typing import Any

from wordle_env.server.app import app as wordle_app


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    path = scope.get("path", "")
    if scope["type"] != "http" or not path.startswith("/test/spin/"):
        await wordle_app(scope, receive, send)
        return
    seconds = float(path.rpartition("/")[2])
    headers = [(b"content-type", b"text/plain")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"spinning"})
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass
