"""A local OpenAI-compatible chat endpoint with scripted players, for offline runs.

    python -m openenv_v1.local_policy --mode solver --port 8001

Serves `POST /v1/chat/completions` (non-streaming; all verifiers sends) and
`GET /v1/models`. Modes:

- `solver`: plays Wordle from the feedback in the conversation, replying "[word]".
- `solver-json`: the same, as `{"message": "[word]"}`.
- `free-text`: prose that is no action at all.
- `empty`: an empty reply.
- `wrong-field`: JSON with the wrong field, `{"guess": "crane"}`.
- `slow`: `solver` after `--delay` seconds.
- `reasoning`: `solver` as a reasoning model without a reasoning parser writes it: a
  `<think>` block that mentions another guess (`[fuzzy]`, also as JSON), then the
  guess. Its first reply is cut off inside the reasoning and its second after it
  (`finish_reason: "length"` both times; the second is otherwise a valid guess).
  Each reply also carries `reasoning_content` naming `[fuzzy]`.
- `tool-call-text`: `solver` as a tool-calling model served without a tool parser
  writes it: `<tool_call>{"name": "act", "arguments": {...}}</tool_call>` in the
  text, after a `<think>` block holding another call; never a structured call.
- `script`: replies from `--script FILE` (a JSON list), by assistant-turn index.

When the request carries tools (native tool calling), the same reply is sent as tool
calls instead of text: a `{"tool_name": ..., "arguments": {...}}` object (or a JSON list
of them) calls those tools; with exactly one tool (`act`), a JSON object is its
arguments and other text fills its one required string field. An empty reply, or
text when there are several tools, is sent as text with no tool call. The Wordle
solver reads the game's feedback from tool results as from user turns.

`--record FILE` appends each request body it receives to FILE as one JSON line (tests
read what the model was sent, images included).

SIGTERM or SIGINT stops it within about a second, also while a reply is pending (a
`slow` one): requests still open after `SHUTDOWN_GRACE_S` are cancelled.
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

MODES = (
    "solver",
    "solver-json",
    "free-text",
    "empty",
    "wrong-field",
    "slow",
    "reasoning",
    "tool-call-text",
    "script",
)

SHUTDOWN_GRACE_S = 1
"""How long a stop signal lets open requests finish (uvicorn's own default is to
wait for them indefinitely)."""
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
        final = {
            "name": "act",
            "arguments": {"message": f"[{next_guess(conversation)}]"},
        }
        return (
            f"<think>Maybe <tool_call>{json.dumps(call)}</tool_call>? No.</think>\n"
            f"<tool_call>\n{json.dumps(final)}\n</tool_call>"
        )
    if mode == "solver-json":
        return json.dumps({"message": f"[{next_guess(conversation)}]"})
    if mode == "free-text":
        return "Let me think about this. I believe a good first move is the word crane."
    if mode == "empty":
        return ""
    if mode == "wrong-field":
        return json.dumps({"guess": "crane"})
    if mode == "script":
        return script[turn] if turn < len(script) else script[-1]
    raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")


def tool_calls(reply: str, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reply as OpenAI tool calls for the request's `tools` (see the module
    docstring); empty when it is to be sent as text."""
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
    """The chat completion answering request `body` with `reply`: as tool calls when
    the request carries tools (see the module docstring), cut off (`length`) where
    `mode` says, with `usage` estimated from the characters."""
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
    prompt_chars = sum(len(_text(m.get("content"))) for m in messages)
    usage = {
        "prompt_tokens": prompt_chars // 4 + 1,
        "completion_tokens": len(reply) // 4 + 1,
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "local-policy"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else finish,
            }
        ],
        "usage": usage,
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
    """The uvicorn server that serves `app`: quiet, stopping within
    `SHUTDOWN_GRACE_S` of a stop even with replies pending."""
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", timeout_graceful_shutdown=SHUTDOWN_GRACE_S
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
