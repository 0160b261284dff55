"""An episode's reset: its frame, and the task its opening turn shows.

`reset_frame` waits out a server at capacity for `capacity_wait_s`; any other refusal
is an `EnvFailure` naming the kwargs, the server's code and message. `opening_task`
is the reset observation or, when it shows nothing (openenv-core 0.2.3 and 0.3.0
strip `metadata` from `/ws` replies), the session's state less bookkeeping and
answer-like fields (`view.task_from_state`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_delay,
    wait_exponential_jitter,
)

from openenv_v1.core.episode.frames import Frame, read_frame
from openenv_v1.core.episode.report import EpisodeLimits
from openenv_v1.core.episode.view import shows_nothing, task_from_state
from openenv_v1.core.errors import (
    EnvFailure,
    describe,
    server_error_code,
    server_error_message,
    server_error_text,
)

__all__ = ["OpeningTask", "at_capacity", "opening_task", "reset_frame"]


def at_capacity(exc: BaseException) -> bool:
    """Whether `exc` is a server's refusal of a new session (`CAPACITY_REACHED`)."""
    return server_error_code(exc) == "CAPACITY_REACHED"


async def reset_frame(
    client: Any, kwargs: dict[str, Any], limits: EpisodeLimits, label: str
) -> Frame:
    """The validated frame of `client.reset(**kwargs)`, waiting out a server at
    capacity for `capacity_wait_s`; an `EnvFailure` naming why when there is none."""
    try:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(at_capacity),
            stop=stop_after_delay(limits.capacity_wait_s),
            wait=wait_exponential_jitter(multiplier=0.5, max=5.0),
            reraise=True,
        ):
            with attempt:
                result = read_frame(
                    await asyncio.wait_for(
                        client.reset(**kwargs), limits.reset_timeout_s
                    )
                )
    except TimeoutError as e:
        raise EnvFailure(
            f"{label}: reset did not answer within {limits.reset_timeout_s:.0f}s"
        ) from e
    except Exception as e:
        if at_capacity(e):
            raise EnvFailure(
                f"{label}: server stayed at capacity for "
                f"{limits.capacity_wait_s:.0f}s: {server_error_message(e)} "
                "(raise the server's session limit or lower concurrency)"
            ) from e
        if (code := server_error_code(e)) is not None:
            shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            raise EnvFailure(
                f"{label}: reset({shown}) was rejected ({code}): "
                f"{server_error_text(e, client)}"
            ) from e
        raise EnvFailure(f"{label}: reset failed: {describe(e)}") from e
    return result


@dataclass(frozen=True)
class OpeningTask:
    """What the opening turn shows (`observation`) and where it came from: the
    reset's `observation`, or the session's `state` (its fields `shown`, those kept
    from the model as answer-like `hidden`). `state_error`: why the state could not
    be read, when it was tried and failed."""

    observation: dict[str, Any]
    source: Literal["observation", "state"] = "observation"
    shown: tuple[str, ...] = ()
    hidden: list[str] = field(default_factory=list)
    state_error: str | None = None

    @property
    def shows_nothing(self) -> bool:
        """Whether the model is shown no task at all (only the action format)."""
        return shows_nothing(self.observation)


async def opening_task(
    client: Any, observation: dict[str, Any], timeout_s: float
) -> OpeningTask:
    """The task the opening turn shows: the reset `observation`, or, when it shows
    the model nothing, the session's state less bookkeeping and answer-like fields."""
    if not shows_nothing(observation):
        return OpeningTask(observation)
    try:
        async with asyncio.timeout(timeout_s):
            state = await client.state()
    except TimeoutError:
        return OpeningTask(
            observation, state_error=f"no answer within {timeout_s:.0f}s"
        )
    except Exception as e:
        return OpeningTask(observation, state_error=describe(e))
    shown, hidden = task_from_state(state)
    if not shown:
        return OpeningTask(observation, hidden=hidden)
    return OpeningTask({**observation, **shown}, "state", tuple(shown), hidden)
