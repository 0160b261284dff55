"""Small vision environments for tests, shaped like OpenEnv's real ones.

- `atari_app`: like `atari_env`. `screen` is a 210x160x3 RGB frame as a flat int list
  with `screen_shape`; pixel (x, y) of step k is `(40 * k % 256, y, x)`. `reset(
  obs_type="ram")` sends the 128-byte RAM instead (`screen_shape: [128]`). Three steps.
- `browser_app`: like BrowserGym. `screenshot` is a nested 96x128x3 list (pixel (x, y)
  of step k is `(x, y, 50 * k)`), `pruned_html` and `axtree_txt` are long texts
  (`HTML_CHARS`, `AXTREE_CHARS`). Two steps.
- `png_app`: `image` is a base64 PNG string (64x48, filled with `(30 * k, 100, 200)`
  at step k), `caption` plain text. Two steps.

Every step pays 1.0.
"""

from __future__ import annotations

import base64
import io
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

HTML_CHARS = 60_000
AXTREE_CHARS = 30_000


class AtariAction(Action):
    action_id: int = Field(description="Index into legal_actions.")


class AtariObservation(Observation):
    screen: list[int] = Field(default_factory=list)
    screen_shape: list[int] = Field(default_factory=list)
    legal_actions: list[int] = Field(default_factory=list)
    lives: int = 3


class BrowserAction(Action):
    action_str: str = Field(description="A BrowserGym action, e.g. click('12').")


class BrowserObservation(Observation):
    goal: str = ""
    url: str = ""
    screenshot: list[list[list[int]]] = Field(default_factory=list)
    pruned_html: str = ""
    axtree_txt: str = ""


class AnswerAction(Action):
    answer: str = Field(description="What the picture shows.")


class PictureObservation(Observation):
    image: str = ""
    caption: str = ""


def atari_frame(step: int) -> list[int]:
    red = 40 * step % 256
    return [v for y in range(210) for x in range(160) for v in (red, y, x)]


def screenshot(step: int) -> list[list[list[int]]]:
    return [[[x, y, 50 * step % 256] for x in range(128)] for y in range(96)]


def picture(step: int) -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 48), (30 * step % 256, 100, 200)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


class _Steps(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True
    STEPS = 2

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed=None, episode_id=None, **kwargs: Any) -> Observation:
        self._state = State(episode_id=episode_id)
        return self.observe(0, **kwargs)

    def step(self, action: Action, timeout_s=None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        observation = self.observe(self._state.step_count)
        observation.reward = 1.0
        observation.done = self._state.step_count >= self.STEPS
        return observation

    def observe(self, step: int, **kwargs: Any) -> Observation:
        raise NotImplementedError

    @property
    def state(self) -> State:
        return self._state


class AtariLike(_Steps):
    STEPS = 3

    def reset(self, seed=None, episode_id=None, obs_type: str = "rgb", **kwargs):
        self.obs_type = obs_type
        return super().reset(seed, episode_id)

    def observe(self, step: int, **kwargs: Any) -> AtariObservation:
        if self.obs_type == "ram":
            screen, shape = [(step + i) % 256 for i in range(128)], [128]
        else:
            screen, shape = atari_frame(step), [210, 160, 3]
        return AtariObservation(
            screen=screen, screen_shape=shape, legal_actions=[0, 1, 2, 3], lives=3
        )


class BrowserLike(_Steps):
    def observe(self, step: int, **kwargs: Any) -> BrowserObservation:
        row = f"<div class='item' id='n{step}'>Red shirt, size M, $20</div>\n"
        html = (row * (HTML_CHARS // len(row) + 1))[:HTML_CHARS]
        node = f"[{step}] link 'Red shirt'\n"
        tree = (node * (AXTREE_CHARS // len(node) + 1))[:AXTREE_CHARS]
        return BrowserObservation(
            goal="Buy a red shirt in size M.",
            url=f"http://shop.local/page/{step}",
            screenshot=screenshot(step),
            pruned_html=html,
            axtree_txt=tree,
        )


class PictureLike(_Steps):
    def observe(self, step: int, **kwargs: Any) -> PictureObservation:
        return PictureObservation(image=picture(step), caption=f"Picture {step}.")


def _app(env: type, action: type, observation: type, name: str):
    return create_app(env, action, observation, env_name=name, max_concurrent_envs=8)


atari_app = _app(AtariLike, AtariAction, AtariObservation, "atari-like")
browser_app = _app(BrowserLike, BrowserAction, BrowserObservation, "browser-like")
png_app = _app(PictureLike, AnswerAction, PictureObservation, "png-like")
