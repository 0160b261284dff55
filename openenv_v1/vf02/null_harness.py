"""What verifiers 0.2.1's `null` harness needs to pass tools to the model, given to it.

The harness runs a uv script whose dependencies are unpinned, so uv resolves the
newest `mcp`; from mcp 2.x on, `create_mcp_http_client` no longer takes the
`httpx.Timeout` the script passes, and the harness fails before the first model call
on any task with tool servers. A runtime prepares a uv script once per program text
(`Runtime.prepare_uv_script`) and then runs the prepared interpreter, so a native
task's `setup`, which runs in the rollout's runtime just before the harness's own,
prepares the null harness's program there first, resolved before mcp 2.0 in a uv
cache of its own (`prepare_null_harness`), and

    eval openenv-v1 --taskset.tool-calls native --harness.id null

works. The package's own harness (`openenv_v1.vf02.harness`) needs none of this.
"""

from __future__ import annotations

import os

import verifiers.v1 as vf

MCP_1_CUTOFF = "2026-07-01T00:00:00Z"
"""Uploads before this date: mcp 1.28.1, the newest `mcp` the script works with there."""


def null_harness_env() -> dict[str, str]:
    """`UV_EXCLUDE_NEWER` before mcp 2.0 and a uv cache of the package's own, under
    `OPENENV_V1_CACHE_DIR` (default `~/.cache/openenv-v1`)."""
    cache = os.environ.get("OPENENV_V1_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "openenv-v1"
    )
    return {
        "UV_EXCLUDE_NEWER": MCP_1_CUTOFF,
        "UV_CACHE_DIR": os.path.join(cache, "null-harness-uv"),
    }


async def prepare_null_harness(
    harness: vf.HarnessConfig | None, runtime: vf.Runtime
) -> None:
    """If `harness` is verifiers' `null` harness, prepare its program in `runtime`
    with `null_harness_env()` (what the harness's `env` sets wins). Other harnesses:
    nothing."""
    if harness is None or harness.id != "null":
        return
    from verifiers.v1.harnesses.null.harness import PROGRAM_SOURCE

    await runtime.prepare_uv_script(
        PROGRAM_SOURCE, {**null_harness_env(), **harness.resolved_env}
    )
