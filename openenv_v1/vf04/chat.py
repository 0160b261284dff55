"""`OpenEnvChatHarness`: the model's side of an OpenEnv episode, in process.

verifiers 0.4's built-in chat harnesses start a program for every segment, and an
OpenEnv episode is one segment per env step. This harness makes a segment's model
call from the eval process, through the interception endpoint verifiers hands it (so
the trace records it), and returns a synthetic success, as `Harness.launch` allows.
With native tool calling a segment is the model's tool-calling loop on the episode's
tools (lent by the env, `openenv_v1.vf04.native`), each call one step, until a reply
calls no tool or the episode is over. The default harness of the `openenv-v1`
tasksets (`--env.player.harness.id <id>` pins another, text tool calls only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import verifiers.v1 as vf

from openenv_v1.chat_calls import call_tools, complete, model_client
from openenv_v1.chat_opening import opening_messages
from openenv_v1.vf04.native import borrowed

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessage


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
        messages = opening_messages(*self.resolve_prompt(data))
        tools = borrowed(trace.id)
        async with model_client(
            endpoint, secret, self.config.request_timeout_s, trace.id
        ) as client:
            if tools is None:
                await complete(client, ctx.model, messages)
            else:
                await call_tools(client, ctx.model, messages, tools, _keep)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _keep(messages: list[dict[str, Any]], reply: ChatCompletionMessage) -> None:
    """A model reply in the form verifiers renders it in when a later segment is
    launched on the conversation so far (`message_to_wire` of the message as the
    trace parsed it), so each request extends the previous one exactly."""
    from verifiers.v1.dialects.chat import message_to_wire, parse_message

    messages.append(message_to_wire(parse_message(reply.model_dump())))


__all__ = ["OpenEnvChatHarness", "OpenEnvChatHarnessConfig"]
