"""`OpenEnvChatHarness`: the model's side of an OpenEnv episode, in process.

verifiers 0.4 runs every agent turn through a harness. Its built-in chat harnesses
(`null`, `bash`) start a program (`uv run` of a chat script) for every segment, and
an OpenEnv episode is one segment per env step: that start-up, not the env or the
model, would set the pace. This harness makes the one model call a segment needs
from the eval process itself, through the interception endpoint verifiers hands it
(so the call is recorded on the trace like any other), and returns a synthetic
success, as `Harness.launch` allows.

    vf-eval openenv-v1 --env.taskset.base-url http://127.0.0.1:8000 -m <model>

It is the default harness of the `openenv-v1` tasksets (exported from the package);
pin another with `--env.player.harness.id <id>`.
"""

from __future__ import annotations

from typing import Any

import verifiers.v1 as vf
from verifiers.v1.dialects.chat import message_to_wire


class OpenEnvChatHarnessConfig(vf.HarnessConfig):
    request_timeout_s: float = 600.0
    """Seconds one model call may take."""


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

        system_prompt, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = []
        if system_prompt:
            messages.append({"role": "system", "content": system_prompt})
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        elif prompt is not None:
            messages += [message_to_wire(m) for m in prompt]
        # Native tool calling (issue 12) passes the action as tools here and returns
        # the model's tool calls; the text path leaves `tools` out.
        async with AsyncOpenAI(
            base_url=endpoint,
            api_key=secret,
            timeout=self.config.request_timeout_s,
            max_retries=2,
        ) as client:
            await client.chat.completions.create(model=ctx.model, messages=messages)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


__all__ = ["OpenEnvChatHarness", "OpenEnvChatHarnessConfig"]
