"""The local Wordle app, ready only `SLOW_READY_S` seconds (3) after its server
process starts serving it (its lifespan's startup, which runs after any fork): a
server that stays starting for a while."""

import asyncio
import os

from wordle_env.server.app import app as wordle


async def app(scope, receive, send):
    if scope["type"] != "lifespan":
        await wordle(scope, receive, send)
        return
    await receive()  # lifespan.startup
    await asyncio.sleep(float(os.environ.get("SLOW_READY_S", "3")))
    await send({"type": "lifespan.startup.complete"})
    await receive()  # lifespan.shutdown
    await send({"type": "lifespan.shutdown.complete"})
