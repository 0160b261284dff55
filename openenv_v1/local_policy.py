"""A local OpenAI-compatible chat endpoint with scripted players, for offline runs.

    python -m openenv_v1.local_policy --mode solver --port 8001

Serves `POST /v1/chat/completions` (non-streaming) and `GET /v1/models`. Modes:

- `solver`: plays Wordle from the feedback in the conversation, replying "[word]"
  (`slow`: the same after `--delay` seconds).
- `free-text`: prose, no action; `empty`: an empty reply; `wrong-field`:
  `{"guess": "crane"}`.
- `reasoning`: `solver` as a reasoning model without a reasoning parser writes it:
  a `<think>` block naming another guess (`[fuzzy]`), then the guess; its first two
  replies end `length`, the first inside the reasoning.
- `tool-call-text`: `solver` as a tool-calling model without a tool parser writes
  it: `<tool_call>...</tool_call>` in the text, after a `<think>` holding another.
- `script`: replies from `--script FILE` (a JSON list), by assistant-turn index.

When the request carries tools, the reply is sent as tool calls (`tool_calls`).
`--record FILE` appends each request body to FILE as a JSON line. A stop signal
ends it within `SHUTDOWN_GRACE_S`, also with replies pending.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openenv_v1.wordle_solver import next_guess

if TYPE_CHECKING:
    import uvicorn

_FIXED = {
    "free-text": "Let me think about this. I believe a good first move is the word crane.",
    "empty": "",
    "wrong-field": json.dumps({"guess": "crane"}),
}
"""The modes that always give the same reply."""
MODES = ("solver", "slow", "reasoning", "tool-call-text", "script", *_FIXED)

SHUTDOWN_GRACE_S = 1
"""How long a stop signal lets open requests finish (uvicorn's own default is to
wait for them indefinitely)."""
KEEP_ALIVE_S = 75
"""How long an idle connection is kept open: longer than clients keep theirs (httpx:
5 s), so a client never sends on one the server is closing (uvicorn's own 5 s made
some of 2,048 calls in flight fail with an empty error)."""
DEFAULT_DELAY_S = 5.0
"""`--delay` unless given: seconds a `slow` reply waits."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") for part in content if isinstance(part, dict)
        )
    return ""


def make_reply(mode: str, messages: list[dict[str, Any]], script: list[str]) -> str:
    conversation = "\n".join(
        _text(m.get("content")) for m in messages if m.get("role") in ("user", "tool")
    )
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    if mode in ("solver", "slow"):
        return f"[{next_guess(conversation)}]"
    if mode == "reasoning":
        thought = (
            'The format could be {"message": "[fuzzy]"} or just [fuzzy]; '
            "the feedback so far rules that out."
        )
        if turn == 0:
            return f"<think>{thought} Let me weigh every letter"
        return f"<think>{thought}</think>\n[{next_guess(conversation)}]"
    if mode == "tool-call-text":
        call = {"name": "act", "arguments": {"message": "[fuzzy]"}}
        final = {**call, "arguments": {"message": f"[{next_guess(conversation)}]"}}
        return (
            f"<think>Maybe <tool_call>{json.dumps(call)}</tool_call>? No.</think>\n"
            f"<tool_call>\n{json.dumps(final)}\n</tool_call>"
        )
    if mode in _FIXED:
        return _FIXED[mode]
    if mode == "script":
        return script[turn] if turn < len(script) else script[-1]
    raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")


def tool_calls(reply: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reply as OpenAI tool calls for the request's `tools`: a `{"tool_name":
    ..., "arguments": {...}}` object (or a list of them) calls those tools; with one
    tool, a JSON object is its arguments and other text fills its first required
    field. Empty (sent as text) for an empty reply, or text with several tools."""
    functions = [t.get("function") or {} for t in tools]
    if not functions:
        return []
    try:
        value = json.loads(reply)
    except json.JSONDecodeError:
        value = None
    calls: list[tuple[str, Any]] = []
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(v, dict) and "tool_name" in v for v in items):
        calls = [(v["tool_name"], v.get("arguments", {})) for v in items]
    elif len(functions) == 1 and reply.strip():
        function = functions[0]
        if isinstance(value, dict):
            calls = [(function.get("name"), value)]
        else:
            required = (function.get("parameters") or {}).get("required") or ["value"]
            calls = [(function.get("name"), {required[0]: reply})]
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for name, arguments in calls
    ]


def completion(mode: str, body: dict[str, Any], reply: str) -> dict[str, Any]:
    """The chat completion answering request `body` with `reply`, cut off where
    `mode` says, its `usage` estimated from the characters."""
    messages = body.get("messages") or []
    turn = sum(1 for m in messages if m.get("role") == "assistant")
    finish = "length" if mode == "reasoning" and turn < 2 else "stop"
    calls = (
        [] if mode == "tool-call-text" else tool_calls(reply, body.get("tools") or [])
    )
    message: dict[str, Any] = {"role": "assistant", "content": reply}
    if mode == "reasoning":
        # As vLLM's reasoning parser returns it: its own field, never the action.
        message["reasoning_content"] = '{"message": "[fuzzy]"} [fuzzy]'
    if calls:
        message = {"role": "assistant", "content": None, "tool_calls": calls}
        finish = "tool_calls"
    prompt = sum(len(_text(m.get("content"))) for m in messages) // 4 + 1
    answer = len(reply) // 4 + 1
    usage = {"prompt_tokens": prompt, "completion_tokens": answer}
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "local-policy"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {**usage, "total_tokens": prompt + answer},
    }


def create_app(
    mode: str,
    delay: float = 0.0,
    script: list[str] | None = None,
    record: Path | None = None,
):
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if mode == "script" and not script:
        raise ValueError("mode 'script' needs a non-empty --script list")

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        if record is not None:
            with record.open("a") as out:
                out.write(json.dumps(body) + "\n")
        if body.get("stream"):
            return JSONResponse(
                {"error": {"message": "streaming is not supported"}}, status_code=400
            )
        messages = body.get("messages") or []
        if mode == "slow":
            await asyncio.sleep(delay)
        reply = make_reply(mode, messages, script or [])
        return JSONResponse(completion(mode, body, reply))

    async def models(_: Request) -> JSONResponse:
        return JSONResponse(
            {"object": "list", "data": [{"id": "local-policy", "object": "model"}]}
        )

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ]
    )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` (0 picks a free port), for `server(...).run`."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    return sock


def server(app: Starlette) -> uvicorn.Server:
    """The uvicorn server that serves `app`: quiet, idle connections kept
    `KEEP_ALIVE_S`, stopping within `SHUTDOWN_GRACE_S` of a stop even with replies
    pending."""
    import uvicorn

    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    return uvicorn.Server(config)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mode", default="solver", choices=MODES)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument(
        "--delay", type=float, default=DEFAULT_DELAY_S, help="seconds, mode slow"
    )
    parser.add_argument("--script", help="JSON file with a list of replies")
    parser.add_argument("--record", help="append each request body here (JSON lines)")
    args = parser.parse_args(argv)
    script = json.loads(Path(args.script).read_text()) if args.script else None
    record = Path(args.record) if args.record else None
    app = create_app(args.mode, delay=args.delay, script=script, record=record)
    sock = listening_socket(args.host, args.port)
    if args.port_file:
        Path(args.port_file).write_text(str(sock.getsockname()[1]))
    server(app).run(sockets=[sock])


if __name__ == "__main__":
    main()
