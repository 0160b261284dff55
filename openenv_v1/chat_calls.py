"""The model calls of the package's chat harnesses, on both verifiers lines.

`OpenEnvHarness` (verifiers 0.2) and `OpenEnvChatHarness` (0.4) call the model from
the eval process, through verifiers' interception endpoint, and run the tool calls of
each reply until one calls none. Where the tools run (0.2: the task's MCP tool
servers; 0.4: the lent episode) and how a reply is kept for the next request differ,
and are the caller's.

    async with model_client(endpoint, secret, timeout_s) as client:
        await call_tools(client, model, messages, tools, keep)

A rollout whose harness is launched again for each turn (0.4) keeps its client, and
so its connection, from one turn to the next while `rollout_clients(trace_id)` runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Protocol

from openenv_v1.core.http_client import async_client

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion, ChatCompletionMessage

__all__ = [
    "ChatTools",
    "call_tools",
    "complete",
    "function_tool",
    "model_client",
    "rollout_clients",
]

_ClientKey = tuple[str, str, float | None]
_kept: dict[str, dict[_ClientKey, AsyncOpenAI]] = {}
"""The clients kept for the rollouts in `rollout_clients`, by trace id."""


@contextlib.asynccontextmanager
async def rollout_clients(rollout_id: str) -> AsyncIterator[None]:
    """Keep rollout `rollout_id`'s model clients from one turn to the next while the
    block runs (a new client and connection for every turn cost the eval about 2.7 ms
    of CPU, server side included); close them after it."""
    clients = _kept[rollout_id] = {}
    try:
        yield
    finally:
        _kept.pop(rollout_id, None)
        for client in clients.values():
            await client.close()


@contextlib.asynccontextmanager
async def model_client(
    endpoint: str, secret: str, timeout_s: float | None, rollout_id: str | None = None
) -> AsyncIterator[AsyncOpenAI]:
    """An OpenAI client for the interception at `endpoint`, open while the block
    runs: the one kept for `rollout_id` when its `rollout_clients` runs, else one of
    its own."""
    kept = _kept.get(rollout_id) if rollout_id is not None else None
    if kept is None:
        async with _new_client(endpoint, secret, timeout_s) as client:
            yield client
        return
    key = (endpoint, secret, timeout_s)
    if key not in kept:
        kept[key] = _new_client(endpoint, secret, timeout_s)
    yield kept[key]


def _new_client(endpoint: str, secret: str, timeout_s: float | None) -> AsyncOpenAI:
    """An OpenAI client for the interception at `endpoint`: `timeout_s` per request
    (None: no limit), two retries, and the process's TLS context (the client's own
    loads the CA bundle, ~25 ms of CPU, for every rollout)."""
    import openai

    return openai.AsyncOpenAI(
        base_url=endpoint,
        api_key=secret,
        timeout=timeout_s,
        max_retries=2,
        http_client=async_client(timeout_s),
    )


def function_tool(name: str, description: str, parameters: Any) -> dict[str, Any]:
    """One tool of a chat completion request's `tools`."""
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


class ChatTools(Protocol):
    """The tools a model's turn may call."""

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The `tools` of a chat completion request."""
        ...

    @property
    def over(self) -> bool:
        """No more calls: the episode ended."""
        ...

    async def run(self, call_id: str, name: str, arguments: str) -> dict[str, Any]:
        """The tool message answering the call `name(arguments)`, `arguments` being
        the JSON text the model wrote."""
        ...


async def complete(
    client: AsyncOpenAI,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> ChatCompletion:
    """One chat completion of `messages` (with `tools`, if any), its body sent as
    built: these are JSON already, and the client's typed walk over every message
    (`chat.completions.create`) cost about 7% of the eval's CPU at 2,048 episodes in
    flight, more as the conversation grows."""
    from openai.types.chat import ChatCompletion

    body: dict[str, Any] = {"model": model, "messages": messages}
    if tools:
        body["tools"] = tools
    return await client.post("/chat/completions", body=body, cast_to=ChatCompletion)


async def call_tools(
    client: AsyncOpenAI,
    model: str,
    messages: list[dict[str, Any]],
    tools: ChatTools,
    keep: Callable[[list[dict[str, Any]], ChatCompletionMessage], None],
) -> None:
    """Model calls on `messages` with `tools`, until a reply calls no tool or the
    tools are `over`. `keep` adds each reply to `messages` as the next request
    repeats it; each tool call's answer follows it."""
    while not tools.over:
        completion = await complete(client, model, messages, tools.specs)
        reply = completion.choices[0].message
        keep(messages, reply)
        if not reply.tool_calls:
            return
        for call in reply.tool_calls:
            function = call.function
            messages.append(await tools.run(call.id, function.name, function.arguments))
