"""The harnesses' model calls (`openenv_v1.chat_calls`) on a real local policy over
loopback: a request carries the messages and tools as given; a rollout's turns share
one client and connection while its `rollout_clients` runs; without it each call has
its own."""

from __future__ import annotations

import asyncio
import json

from openenv_v1.chat_calls import (
    complete,
    function_tool,
    model_client,
    rollout_clients,
)
from tests.servers import policy_server, recorded_requests

HELLO = [{"role": "user", "content": "Guess a five-letter word."}]


async def _turn(url: str, rollout_id: str | None):
    async with model_client(url, "local", 30, rollout_id) as client:
        completion = await client.chat.completions.create(model="local", messages=HELLO)
    assert completion.choices[0].message.content
    return client


def test_a_rollouts_turns_share_one_client_while_it_keeps_them() -> None:
    clients: list[tuple[str, int]] = []
    with policy_server("free-text", clients=clients) as url:

        async def rollouts():
            async with rollout_clients("a"), rollout_clients("b"):
                a = [await _turn(url, "a") for _ in range(3)]
                b = await asyncio.gather(*(_turn(url, "b") for _ in range(1)))
                b.append(await _turn(url, "b"))
            unkept = [await _turn(url, "a") for _ in range(2)]
            return a, b, unkept

        a, b, unkept = asyncio.run(rollouts())

    assert len(set(map(id, a))) == 1 and len(set(map(id, b))) == 1
    assert a[0] is not b[0]
    assert all(c.is_closed() for c in [a[0], b[0], *unkept])
    assert unkept[0] is not unkept[1]
    assert len(clients) == 7
    # One connection a kept rollout: a's three turns, b's two; then one a call.
    assert len(set(clients[:3])) == 1 and len(set(clients[3:5])) == 1
    assert len(set(clients)) == 4


def test_a_completion_sends_the_messages_and_tools_as_given(tmp_path) -> None:
    record = tmp_path / "bodies.jsonl"
    move = {"type": "object", "properties": {"message": {"type": "string"}}}
    tools = [function_tool("act", "One move.", {**move, "required": ["message"]})]
    with policy_server("solver", record=record) as url:

        async def calls():
            async with model_client(url, "local", 30) as client:
                return (
                    await complete(client, "m", HELLO),
                    await complete(client, "m", HELLO, []),
                    await complete(client, "m", HELLO, tools),
                )

        plain, no_tools, called = asyncio.run(calls())

    assert recorded_requests(record) == [
        {"model": "m", "messages": HELLO},
        {"model": "m", "messages": HELLO},
        {"model": "m", "messages": HELLO, "tools": tools},
    ]
    assert plain.choices[0].message.content == no_tools.choices[0].message.content
    assert (plain.choices[0].message.content or "").startswith("[")
    call = (called.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "act"
    assert json.loads(call.function.arguments)["message"].startswith("[")
