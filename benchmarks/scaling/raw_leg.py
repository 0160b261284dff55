"""A bare OpenEnv client per episode on directly launched servers: the baseline an
eval's step times are divided by."""

from __future__ import annotations

import asyncio
import time

import httpx

from scaling.procs import WORDLE_APP, WORDLE_PROJECT
from scaling.results import LegResult

WORDLE_SESSIONS = 64
"""The local Wordle env's default session limit per server (`WORDLE_MAX_SESSIONS`)."""


def raw_leg(
    level: int,
    episodes: int,
    servers: int,
    replay: dict[int, list[str]],
    policy_url: str | None = None,
) -> LegResult:
    """A bare `GenericEnvClient` per episode on `servers` directly launched servers.
    Unpaced (`raw`): stepping the replies the eval leg's model sent for the same seed
    (the solver guesses, in process, for a seed with none), back to back. Paced
    (`raw-paced`, with `policy_url`): asking the same local policy for every move
    over HTTP, as an eval does, so the servers see an eval's rhythm of steps."""
    from openenv_v1.core.launch.uv import SupervisedUVProvider
    from openenv_v1.wordle_solver import next_guess

    providers = []
    try:
        for _ in range(servers):
            provider = SupervisedUVProvider(
                project_path=str(WORDLE_PROJECT), app=WORDLE_APP, host="127.0.0.1"
            )
            providers.append(provider)
            provider.start()
        urls = [provider.wait_for_ready() for provider in providers]
        name = "raw-paced" if policy_url else "raw"
        result = LegResult(name, level, episodes, 0, 0.0, [])
        limits = httpx.Limits(max_connections=level, max_keepalive_connections=level)
        model = httpx.AsyncClient(timeout=600, limits=limits)

        async def move(seen: str, script: list[str]) -> str:
            if policy_url is None:
                return script.pop(0) if script else f"[{next_guess(seen)}]"
            body = {"model": "local", "messages": [{"role": "user", "content": seen}]}
            reply = await model.post(f"{policy_url}/chat/completions", json=body)
            reply.raise_for_status()
            return reply.json()["choices"][0]["message"]["content"]

        async def main() -> None:
            from openenv_v1.core.light_import import generic_client_class

            client_class = generic_client_class()
            gate = asyncio.Semaphore(level)
            # Each server at the Wordle env's own session limit: an episode waits
            # for room on its server, as a pool's lease would.
            room = {url: asyncio.Semaphore(WORDLE_SESSIONS) for url in urls}

            async def one(i: int) -> None:
                url = urls[i % len(urls)]
                async with gate, room[url]:
                    try:
                        async with client_class(
                            base_url=url,
                            connect_timeout_s=120,
                            message_timeout_s=120,
                        ) as client:
                            reply = await client.reset(seed=i)
                            seen = str(reply.observation)
                            script = list(replay.get(i, []))
                            while not reply.done:
                                message = await move(seen, script)
                                t0 = time.perf_counter()
                                reply = await client.step({"message": message})
                                result.step_s.append(time.perf_counter() - t0)
                                seen += "\n" + str(reply.observation)
                        result.ok += 1
                    except Exception as e:
                        result.errors.append(f"{type(e).__name__}: {e}"[:160])

            started = time.monotonic()
            await asyncio.gather(*(one(i) for i in range(episodes)))
            result.wall_s = time.monotonic() - started
            await model.aclose()

        asyncio.run(main())
        result.servers = servers
        return result
    finally:
        for provider in providers:
            provider.stop()
