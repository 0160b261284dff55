"""The local Wordle env, counting the sessions opened on it, for tests of evals
spread over several servers: `GET /test/sessions` answers how many WebSocket
sessions (`/ws`) were opened on this server so far, `GET /test/schema_reads` how
many times its `/schema` was read, `GET /test/pid` its process id (a test kills
it)."""

import os
from typing import Any

from wordle_env.server.app import app as wordle_app

_opened = 0
_schema_reads = 0


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _opened, _schema_reads
    answers = {
        "/test/sessions": _opened,
        "/test/schema_reads": _schema_reads,
        "/test/pid": os.getpid(),
    }
    if scope["type"] == "http" and scope["path"] in answers:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send(
            {"type": "http.response.body", "body": str(answers[scope["path"]]).encode()}
        )
        return
    if scope["type"] == "websocket" and scope["path"] == "/ws":
        _opened += 1
    if scope["type"] == "http" and scope["path"] == "/schema":
        _schema_reads += 1
    await wordle_app(scope, receive, send)
