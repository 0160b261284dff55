"""The local scripted policy, also answering `"stream": true` (as server-sent events).

    python benchmarks/streaming_policy.py --port 8002 --mode solver

verifiers 0.4's `null` harness (the chat program the built-in `openenv` taskset runs
per turn) only streams, which `openenv_v1.local_policy` does not; this wraps that
policy's app and turns each reply into one content chunk, a finish chunk with the
usage, and `[DONE]`. Used by the benchmark's `vf04-builtin` leg only.
"""

from __future__ import annotations

import argparse
import json

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route

from openenv_v1.local_policy import MODES, create_app


def streaming_app(mode: str) -> Starlette:
    policy = create_app(mode)
    transport = httpx.ASGITransport(app=policy)

    async def completions(request: Request) -> Response:
        body = await request.json()
        stream = body.pop("stream", False)
        body.pop("stream_options", None)
        async with httpx.AsyncClient(transport=transport, base_url="http://p") as c:
            answer = await c.post("/v1/chat/completions", json=body)
        if not stream or answer.status_code != 200:
            return Response(answer.content, answer.status_code, answer.headers)
        done = answer.json()
        choice = done["choices"][0]
        base = {k: done[k] for k in ("id", "created", "model")}
        base["object"] = "chat.completion.chunk"
        chunks = [
            {**base, "choices": [{"index": 0, "delta": choice["message"]}]},
            {
                **base,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": done["usage"],
            },
        ]

        async def events():
            for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Mount("/", app=policy),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="solver", choices=MODES)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = streaming_app(args.mode)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
