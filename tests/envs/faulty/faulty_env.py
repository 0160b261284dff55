"""A plain (non-MCP) OpenEnv env that misbehaves on request, for fault-injection tests.

The action has two required fields, `{"move": str, "amount": int}`, so a bare-text reply
is never an action. Moves:

- `score`: pays `amount`;
- `finish`: pays `amount` and ends the episode;
- `hang`: answers only after `amount` seconds;
- `crash`: the server process SIGKILLs itself while the step is in flight.

`reset(seed, episode_id, difficulty)` takes no `**kwargs`, so OpenEnv drops any other
reset key without telling the env; a `difficulty` other than "easy" or "hard" raises.

`FAULTY_MAX_SESSIONS` (default 8) caps the server's WebSocket sessions. The app counts
the sessions it refused with `CAPACITY_REACHED` and serves the count at
`GET /faulty/stats`.
"""

import asyncio
import os
import signal
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

DIFFICULTIES = ("easy", "hard")


class FaultyAction(Action):
    move: str
    amount: int


class FaultyObservation(Observation):
    text: str = ""
    difficulty: str = ""


class FaultyEnvironment(Environment[FaultyAction, FaultyObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self.difficulty = "easy"

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        difficulty: str = "easy",
    ) -> FaultyObservation:
        if difficulty not in DIFFICULTIES:
            raise ValueError(
                f"difficulty {difficulty!r} is not one of {', '.join(DIFFICULTIES)}"
            )
        self.difficulty = difficulty
        self._state = State(episode_id=episode_id)
        return FaultyObservation(
            text=f"Ready ({difficulty}).", difficulty=difficulty, reward=0.0
        )

    def step(
        self, action: FaultyAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FaultyObservation:
        if action.move == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        if action.move not in ("score", "finish"):
            raise ValueError(f"unknown move {action.move!r}")
        self._state.step_count += 1
        return FaultyObservation(
            text=f"{action.move} {action.amount} (step {self._state.step_count})",
            difficulty=self.difficulty,
            reward=float(action.amount),
            done=action.move == "finish",
        )

    async def step_async(
        self, action: FaultyAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FaultyObservation:
        if action.move == "hang":
            await asyncio.sleep(action.amount)
            return FaultyObservation(text="woke up", difficulty=self.difficulty)
        return self.step(action)

    @property
    def state(self) -> State:
        return self._state


class _CountRefusals:
    """ASGI middleware counting WebSocket frames that refuse a session at capacity."""

    refusals = 0

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)

        async def counting_send(message: Any) -> None:
            if message["type"] == "websocket.send" and "CAPACITY_REACHED" in (
                message.get("text") or ""
            ):
                _CountRefusals.refusals += 1
            await send(message)

        return await self.app(scope, receive, counting_send)


app = create_app(
    FaultyEnvironment,
    FaultyAction,
    FaultyObservation,
    env_name="faulty",
    max_concurrent_envs=int(os.environ.get("FAULTY_MAX_SESSIONS", "8")),
)
app.add_middleware(_CountRefusals)


@app.get("/faulty/stats")
async def stats() -> dict[str, int]:
    return {"capacity_rejections": _CountRefusals.refusals}
