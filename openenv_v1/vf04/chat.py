"""`OpenEnvChatHarness`: the model's side of an OpenEnv episode, in process.

verifiers 0.4 runs every agent turn through a harness. Its built-in chat harnesses
(`null`, `bash`) start a program (`uv run` of a chat script) for every segment, and
an OpenEnv episode is one segment per env step: that start-up, not the env or the
model, would set the pace. This harness makes the one model call a segment needs
from the eval process itself, through the interception endpoint verifiers hands it
(so the call is recorded on the trace like any other), and returns a synthetic
success, as `Harness.launch` allows.

    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000 -m <model>

With native tool calling (`--env.taskset.tool-calls native`) a segment is the model's
turn as a tool-calling loop: the harness passes the episode's tools (lent by the env,
`openenv_v1.vf04.native`) with each model call and runs each tool call as one step,
in process, until a reply calls no tool or the episode is over. Every model call
still goes through the interception, so the trace holds the tool calls and results.

It is the default harness of the `openenv-v1` tasksets (exported from the package);
pin another with `--env.player.harness.id <id>` (text tool calls only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.chat_opening import opening_messages
from openenv_v1.core.http_client import async_client
from openenv_v1.vf04.native import EpisodeTools, borrowed

if TYPE_CHECKING:
    from openai import AsyncOpenAI


class OpenEnvChatHarnessConfig(vf.HarnessConfig):
    request_timeout_s: float | None = None
    """Seconds one model call may take; unset, no limit of its own (verifiers' own
    clients set none; `--timeout.agent` bounds the rollout). A reasoning model may
    think for many minutes, and a slow model is not a slow env (`step_timeout_s`
    bounds env steps)."""


class OpenEnvChatHarness(vf.Harness[OpenEnvChatHarnessConfig]):
    """One chat completion per segment, on the conversation so far."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_RESUME = True  # each later segment is launched on the whole conversation
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        from openai import AsyncOpenAI

        messages = opening_messages(*self.resolve_prompt(data))
        tools = borrowed(trace.id)
        async with AsyncOpenAI(
            base_url=endpoint,
            api_key=secret,
            timeout=self.config.request_timeout_s,
            max_retries=2,
            # A client per segment is cheap only with the process's TLS context:
            # the OpenAI client's own loads the CA bundle (~25 ms of CPU) each time.
            http_client=async_client(self.config.request_timeout_s),
        ) as client:
            if tools is None:
                await client.chat.completions.create(model=ctx.model, messages=messages)
            else:
                await self._call_tools(client, ctx.model, messages, tools)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")

    @staticmethod
    async def _call_tools(
        client: AsyncOpenAI,
        model: str,
        messages: list[dict[str, Any]],
        tools: EpisodeTools,
    ) -> None:
        """Model calls with the episode's tools, each tool call one step, until a
        reply calls no tool or the episode is over."""
        while not tools.over:
            completion = await client.chat.completions.create(
                model=model, messages=messages, tools=tools.specs
            )
            message = completion.choices[0].message
            if not message.tool_calls:
                return  # the env answers that reply (a reminder to call a tool)
            messages.append(_as_replayed(message.model_dump()))
            for call in message.tool_calls:
                # Calls after the episode ended are answered without a step.
                name = call.function.name
                messages.append(await tools.run(call.id, name, call.function.arguments))


def _as_replayed(message: dict[str, Any]) -> dict[str, Any]:
    """A model reply in the form verifiers renders it in when a later segment is
    launched on the conversation so far (`message_to_wire` of the message as the
    trace parsed it), so each request extends the previous one exactly."""
    from verifiers.v1.dialects.chat import message_to_wire, parse_message

    return message_to_wire(parse_message(message))


__all__ = ["OpenEnvChatHarness", "OpenEnvChatHarnessConfig"]
