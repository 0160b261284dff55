"""Wordle (`openenv/wordle`) as a verifiers 0.2 taskset: the thin-wrapper pattern.

    uv run eval openenv-wordle-v1 -m <model> ...
    uv run eval openenv-wordle-v1 --taskset.base-url http://127.0.0.1:8000 ...

Copy this for another env: subclass `OpenEnvConfig`, pin `env`, default what its
launch needs (here the Space's non-default ASGI app), point a taskset at it, and
export it beside the in-process chat harness (the default harness of its id).
"""

from typing import Any, Self

import verifiers.v1 as vf
from pydantic import model_validator

from openenv_v1 import OpenEnvConfig, OpenEnvHarness, OpenEnvTask, OpenEnvTaskset

WORDLE_APP = "textarena_env.server.app:app"


class OpenEnvWordleConfig(OpenEnvConfig):
    env: str | None = "openenv/wordle"
    """The Wordle Space, launched with UV unless `base_url` is set."""
    resets: list[dict[str, Any]] = [{"seed": seed} for seed in range(5)]
    """Five games; the Space itself ignores seeds."""

    @model_validator(mode="after")
    def _default_app(self) -> Self:
        # Only a default: an `app` the user set (e.g. for a local checkout) stays.
        self.task.user.provider_kwargs.setdefault("app", WORDLE_APP)
        return self


class OpenEnvWordleTaskset(
    OpenEnvTaskset, vf.Taskset[OpenEnvTask, OpenEnvWordleConfig]
):
    """`OpenEnvTaskset`, typed with the Wordle config so the CLI resolves it."""


__all__ = ["OpenEnvHarness", "OpenEnvWordleConfig", "OpenEnvWordleTaskset"]
