"""What verifiers 0.2.1's `null` harness needs to pass tools to the model today.

The harness runs a uv script whose dependencies are unpinned (`openai`, `mcp`, ...),
so uv resolves the newest `mcp`. From mcp 2.x on, its `create_mcp_http_client` no
longer takes the `httpx.Timeout` the script passes (`TypeError: unsupported operand
type(s) for +: 'float' and 'Timeout'`), and the harness fails before the first model
call on any task with tool servers, native tool calling included. Until verifiers pins
it, give the harness an environment whose resolution stops before mcp 2.0, in a uv
cache of its own (uv keeps a script environment that already holds mcp 2.x):

    --harness.env '{"UV_EXCLUDE_NEWER": "2026-07-01T00:00:00Z", "UV_CACHE_DIR": "~/.cache/openenv-v1/null-harness-uv"}'

`null_harness_env()` is that environment (the cache path expanded); the demo, the
benchmark and the tests pass it with `--harness.env`.
"""

from __future__ import annotations

import json
import os

MCP_1_CUTOFF = "2026-07-01T00:00:00Z"
"""Uploads before this date: mcp 1.28.1, the newest `mcp` the script works with there."""


def null_harness_env() -> dict[str, str]:
    cache = os.environ.get("OPENENV_V1_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "openenv-v1"
    )
    return {
        "UV_EXCLUDE_NEWER": MCP_1_CUTOFF,
        "UV_CACHE_DIR": os.path.join(cache, "null-harness-uv"),
    }


def null_harness_flags() -> list[str]:
    """`eval` flags: the null harness with that environment."""
    return ["--harness.id", "null", "--harness.env", json.dumps(null_harness_env())]
