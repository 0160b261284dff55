"""An env that needs a service key: `uvicorn server.app:app` from this folder.

Its reset reads `TEST_SERVICE_API_KEY` from the server's environment (listed in
`.env.example`, as OpenEnv's jupyter_env lists `E2B_API_KEY`). Without it the reset
ends the episode at once (`done`, no reward) and says why only in `metadata`, which
openenv-core 0.3.0 servers strip from `/ws` replies. With it the episode is one step:
any command pays 1.0 and ends it, but `upload`, which needs
`TEST_SERVICE_UPLOAD_TOKEN` too: without it, the step's reply says it failed
(`metadata.status` "error", naming the token), as opencode_env's `run_rollout` tool
does without `E2B_API_KEY` (its reset needs none). No value is ever shown.
"""

import os
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class KeyedAction(Action):
    command: str = Field(description="Anything: every command is accepted.")


class KeyedObservation(Observation):
    message: str = Field(default="", description="What the env says.")


class KeyedEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> KeyedObservation:
        self._state = State(episode_id=episode_id)
        if not os.environ.get("TEST_SERVICE_API_KEY"):
            return KeyedObservation(
                message="",
                done=True,
                reward=None,
                metadata={
                    "status": "error",
                    "error": "TEST_SERVICE_API_KEY is not set: configure it first",
                },
            )
        return KeyedObservation(message="Send any command.", done=False, reward=None)

    def step(self, action: KeyedAction, timeout_s=None, **kwargs: Any):
        self._state.step_count += 1
        if action.command == "upload" and not os.getenv("TEST_SERVICE_UPLOAD_TOKEN"):
            return KeyedObservation(
                message="The upload failed.",
                done=False,
                reward=None,
                metadata={
                    "status": "error",
                    "error": "TEST_SERVICE_UPLOAD_TOKEN is not set on the server",
                },
            )
        return KeyedObservation(message="Done.", done=True, reward=1.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    KeyedEnvironment,
    KeyedAction,
    KeyedObservation,
    env_name="keyed_env",
    max_concurrent_envs=8,
)
