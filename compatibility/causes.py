"""Whose a failure is: the env's own (it would fail the same way under OpenEnv's own
client) or "adapter?" (worth a look), from the failure's text."""

from __future__ import annotations

import re

__all__ = ["classify"]


# Failure text -> whose it is. First match wins; "env's own" means the env would fail
# the same way under OpenEnv's own client (a missing download, key, binary, a bug).
# Known faults of this adapter, named so that a run does not read them as "adapter?".
ADAPTER_BUGS = [
    (
        r"'str' object has no attribute 'flag'",
        "adapter bug (openenv_v1 calls render_settings with a surface's old name, "
        "a string, since merge a9ccc0f)",
    ),
]


ENV_NEEDS = [
    (
        r"needs Python|python-build-standalone",
        "env's own need (a Python uv cannot find)",
    ),
    (
        r"git\+https|Failed to clone|failed to fetch.*github|pins openenv at commit",
        "env's own need (a git dependency)",
    ),
    (
        r"No solution found when resolving|unsatisfiable",
        "env's own bug (unsatisfiable deps)",
    ),
    (r"OpenSpiel is not installed", "env's own need (OpenSpiel, undeclared)"),
    (
        r"has no attribute 'model_dump'",
        "env's own bug (step returns a non-Observation)",
    ),
    (
        r"rejected WebSocket connection: HTTP 403|it speaks only HTTP",
        "env's own (no OpenEnv /ws endpoint)",
    ),
    (r"/schema: HTTPStatusError: Server error", "env's own bug (/schema answers 500)"),
    (
        r"dns error|Name or service not known|Temporary failure in name resolution",
        "env's own need (network)",
    ),
    (r"huggingface|hf_hub|HF_TOKEN", "env's own need (Hugging Face)"),
    (r"E2B_API_KEY", "env's own need (an E2B sandbox: E2B_API_KEY)"),
    (r"API_KEY|api key", "env's own need (an API key)"),
    (
        r"ended the episode at its reset|the env's reset failed",
        "env's own (its reset refused the episode)",
    ),
    (r"nltk|NLTK", "env's own need (NLTK data)"),
    (r"playwright|chromium|Executable doesn't exist", "env's own need (a browser)"),
    (r"SUMO_HOME", "env's own need (the SUMO simulator)"),
    (
        r"openenv-core 0\.2\.x|openenv-core 0\.2\.2 deadlock",
        "env's own (its lock pins openenv-core 0.2.2)",
    ),
    (r"ModuleNotFoundError: No module named", "env's own need (an undeclared module)"),
    (
        r"FACTORY_ERROR",
        "env's own? (its factory raised; the cause is only in the server log)",
    ),
    (r"Failed to build|Failed to download", "env's own need (deps)"),
]


def classify(error: str) -> str:
    for pattern, owner in ADAPTER_BUGS + ENV_NEEDS:
        if re.search(pattern, error):
            return owner
    return "adapter?"
