"""A hostile OpenEnv-protocol server: it speaks OpenEnv's `/ws` protocol itself (no
OpenEnv server code, which would refuse to send most of this) and sends, on request,
every kind of malformed frame and schema an env server could.

The action is `{"move": str}` (a bare reply is the move). An episode picks its fault
with the reset kwarg `fault`; the reset then answers normally, the first step pays 0.5,
the second step sends the fault, and any later step pays 1.0 and ends the episode (so
an episode that carries on past the fault scores 1.5). Step faults:

- `string_reward` (`"1.0"`), `huge_reward` (a 400-digit integer), `nan_reward`,
  `inf_reward`, `string_done` (`"yes"`), `nan_signal` (`reward_signals.win` NaN);
- `string_observation`, `list_observation`, `deep_observation` (nested 500 levels);
- `no_data`: a frame with no `data` at all (`{"type": "observation"}`);
- `undecodable_depth`: an observation nested 100,000 levels, deeper than Python's
  JSON decoder reads;
- `bomb_image`: a PNG that claims 20000x20000 pixels (about 50 KB of file, 400 M
  pixels decoded), as the `screen` field, paying 0.5 and not done;
- `many_images`: 20 fields each holding a 1024x1024 noise PNG (3 MB each), paying
  0.5 and not done.
- `reset_string_observation`: the reset itself sends a string observation.

`/schema` is the action schema above; under a path prefix it is broken instead (the
client of `http://127.0.0.1:PORT/<prefix>` reads `<prefix>/schema` and opens
`<prefix>/ws`, which behaves as above): `remote_ref` (a `$ref` to a local silent TCP
server that accepts and never answers; `GET /hostile/stats` counts the connections
it got), `bad_regex`, `dangling_ref`, `not_object`, `deep_schema`, `recursive` (a
valid self-referencing schema whose required field refers to itself), `slow_schema`
(a byte every 0.2 s, forever), `huge_schema` (a 20 MB body) and `undecodable_schema`
(nested 100,000 levels, past the JSON decoder).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import socket
import struct
import threading
import zlib
from typing import Any

from PIL import Image
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

ACTION = {
    "title": "HostileAction",
    "type": "object",
    "properties": {"move": {"type": "string"}},
    "required": ["move"],
}


class _Silent:
    """A TCP listener that accepts connections and never answers them."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            self.accepted += 1
            self._held.append(conn)


SILENT = _Silent()


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _deep_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return {**ACTION, "properties": {"move": {"type": "string"}, "deep": schema}}


SCHEMAS: dict[str, Any] = {
    "remote_ref": {
        **ACTION,
        "properties": {"move": {"$ref": f"http://127.0.0.1:{SILENT.port}/move.json"}},
    },
    "bad_regex": {
        **ACTION,
        "properties": {"move": {"type": "string", "pattern": "(["}},
    },
    "dangling_ref": {**ACTION, "properties": {"move": {"$ref": "#/$defs/Missing"}}},
    "not_object": ["move"],
    "deep_schema": _deep_schema(200),
    "recursive": {
        "title": "HostileAction",
        "type": "object",
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "next": {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
                },
                "required": ["next"],
            }
        },
        "properties": {"move": {"type": "string"}, "node": {"$ref": "#/$defs/Node"}},
        "required": ["move", "node"],
    },
}


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _bomb_png(side: int) -> bytes:
    """A real 1-bit PNG of `side` x `side` black pixels, its zeros compressed."""
    row = b"\0" * (1 + (side + 7) // 8)
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row * 500) for _ in range(side // 500))
    data += packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", data)
        + _png_chunk(b"IEND", b"")
    )


def _noise_png(side: int) -> bytes:
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), os.urandom(side * side * 3)).save(
        out, "PNG", compress_level=1
    )
    return out.getvalue()


BOMB = base64.b64encode(_bomb_png(20000)).decode()
NOISE = base64.b64encode(_noise_png(1024)).decode()


def _frame(observation: str, reward: str = "null", done: str = "false") -> str:
    """An observation frame as raw JSON text (so NaN and 400-digit numbers are sent
    exactly so)."""
    data = f'"observation": {observation}, "reward": {reward}, "done": {done}'
    return '{"type": "observation", "data": {' + data + "}}"


def _text(text: str) -> str:
    return json.dumps({"text": text})


def fault_frame(fault: str) -> str:
    """The second step's frame for `fault`."""
    if fault == "string_reward":
        return _frame(_text("a string reward"), '"1.0"')
    if fault == "huge_reward":
        return _frame(_text("a huge reward"), "1" * 400)
    if fault == "nan_reward":
        return _frame(_text("a NaN reward"), "NaN")
    if fault == "inf_reward":
        return _frame(_text("an infinite reward"), "Infinity")
    if fault == "string_done":
        return _frame(_text("a string done"), "0.0", '"yes"')
    if fault == "nan_signal":
        observation = (
            '{"text": "a NaN signal", "metadata": {"reward_signals": {"win": NaN}}}'
        )
        return _frame(observation, "0.0")
    if fault == "string_observation":
        return _frame('"you win"', "1.0")
    if fault == "list_observation":
        return _frame("[1, 2, 3]", "1.0")
    if fault == "deep_observation":
        return _frame(json.dumps({"text": "deep", "tree": _nested(500, 1)}), "1.0")
    if fault == "no_data":
        return '{"type": "observation"}'
    if fault == "undecodable_depth":
        tree = "[" * 100_000 + "]" * 100_000
        return _frame('{"text": "too deep", "tree": ' + tree + "}", "1.0")
    if fault == "bomb_image":
        return _frame(json.dumps({"text": "a bomb", "screen": BOMB}), "0.5")
    if fault == "many_images":
        images = {f"camera_{i}": NOISE for i in range(20)}
        return _frame(json.dumps({"text": "twenty cameras", **images}), "0.5")
    return _frame(_text(f"no such fault {fault!r}"))


async def play(ws: WebSocket) -> None:
    await ws.accept()
    fault, steps = "", 0
    try:
        while True:
            message = json.loads(await ws.receive_text())
            kind = message.get("type")
            if kind == "close":
                break
            if kind == "state":
                await ws.send_text(
                    json.dumps({"type": "state", "data": {"steps": steps}})
                )
            elif kind == "reset":
                fault = str((message.get("data") or {}).get("fault") or "")
                steps = 0
                if fault == "reset_string_observation":
                    await ws.send_text(_frame('"not an object"'))
                else:
                    await ws.send_text(_frame(_text(f"Ready ({fault or 'no fault'}).")))
            elif kind == "step":
                steps += 1
                if steps == 1:
                    await ws.send_text(_frame(_text("first step"), "0.5"))
                elif steps == 2:
                    await ws.send_text(fault_frame(fault))
                else:
                    await ws.send_text(_frame(_text("carried on"), "1.0", "true"))
    except WebSocketDisconnect:
        pass
    else:
        await ws.close()


async def schema(request: Any) -> Response:
    variant = request.path_params.get("variant", "")
    if variant == "slow_schema":

        async def drip():
            yield b'{"action": {"type": "object", "description": "'
            while True:
                await asyncio.sleep(0.2)
                yield b"."

        return StreamingResponse(drip(), media_type="application/json")
    if variant == "undecodable_schema":
        body = '{"action": ' + "[" * 100_000 + "]" * 100_000 + "}"
        return Response(body, media_type="application/json")
    if variant == "huge_schema":
        body = json.dumps(
            {"action": {"type": "object", "description": "x" * 20_000_000}}
        )
        return Response(body, media_type="application/json")
    action = SCHEMAS.get(variant, ACTION)
    return JSONResponse({"action": action, "observation": {}, "state": {}})


async def health(request: Any) -> Response:
    return JSONResponse({"status": "healthy"})


async def stats(request: Any) -> Response:
    return JSONResponse({"silent_connections": SILENT.accepted})


app = Starlette(
    routes=[
        Route("/health", health),
        Route("/hostile/stats", stats),
        Route("/schema", schema),
        WebSocketRoute("/ws", play),
        Route("/{variant}/schema", schema),
        WebSocketRoute("/{variant}/ws", play),
    ]
)
