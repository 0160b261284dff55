"""Loaded (via PYTHONPATH) only by the benchmark's `vf04-builtin` leg.

verifiers 0.4.0's built-in `openenv` taskset reads `client._base_url`, which only
openenv 0.10 has; openenv-core 0.3.0, the only OpenEnv that installs beside verifiers
0.4.0, keeps just `_ws_url`, so every rollout fails with an AttributeError. This
gives the client that attribute, so the built-in can be timed at all.
"""

import contextlib

with contextlib.suppress(ImportError):
    from openenv.core.env_client import EnvClient

    if not hasattr(EnvClient, "_base_url"):
        EnvClient._base_url = property(lambda self: self._ws_url.removesuffix("/ws"))
