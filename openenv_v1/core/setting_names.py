"""Settings named in the core's messages, spelled as the surface the user is on.

The core never writes a binding's path for a setting. A message names the setting by
its own name through `setting(name)`, which writes it in backticks
(`` `launch_timeout_s` ``): a token that reads well as it is, and that each surface
turns into its own syntax with `render_settings(text, surface)` where it hands a
failure to the user:

    vf02   `--taskset.task.user.launch-timeout-s` (`eval`; in a TOML config the
           same path: [taskset.task.user] launch_timeout_s)
    vf04   `--env.taskset.launch-timeout-s` (`vf-eval`)
    check  `--launch-timeout` (`openenv-v1 check`)

The token is in the text itself, so a failure names its settings wherever its text
travels: a shared server's failure, formed in the eval process, reaches a 0.2 user
simulator over the pool's endpoint as text, and a launched server's own output
quotes the stand-in gradio's message. A token for a setting `check` has no flag for
stays as it is there (`check` runs no rollout); a `provider_kwargs` key without a
flag of its own is rendered as the `--provider-kwargs` JSON that sets it.

    raise EnvFailure(f"... raise {setting('launch_timeout_s')} if it is just slow")
    render_settings(str(failure), "check")  # "... raise `--launch-timeout` if ..."
    named_settings(str(failure))             # ("launch_timeout_s",)
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = ["SURFACES", "Surface", "named_settings", "render_settings", "setting"]

Surface = Literal["vf02", "vf04", "check"]
SURFACES: tuple[Surface, ...] = ("vf02", "vf04", "check")

# Each setting the core names, with its flag in `openenv-v1 check` (None: it has none).
# The per-episode settings (`openenv_v1.settings.EpisodeSettings`) sit under
# `task.user` on verifiers 0.2; the taskset's own settings sit on the taskset there.
_EPISODE: dict[str, str | None] = {
    "provider_kwargs": "--provider-kwargs",
    "forward_env": "--forward-env",
    "server_web_ui": "--web-ui",
    "launch_timeout_s": "--launch-timeout",
    "reset_timeout_s": "--timeout",
    "step_timeout_s": "--timeout",
    "episode_timeout_s": None,
}
_TASKSET: dict[str, str | None] = {
    "base_url": "--base-url",
    "provider": "--provider",
    "use_docker": "--use-docker",
}
# `provider_kwargs` keys `check` has a flag for.
_CHECK_KEYS = {"app": "--app", "project_path": "--project-path"}

_KEY = r"[a-z][a-z0-9_]*"
_TOKEN = re.compile(
    rf"`(?P<name>provider_kwargs\.{_KEY}|"
    + "|".join(sorted(map(re.escape, {*_EPISODE, *_TASKSET}), key=len, reverse=True))
    + r")`"
)


def setting(name: str) -> str:
    """The token naming setting `name` in a message (`` `name` ``). `name` is one of
    the settings above, or `provider_kwargs.<key>`; anything else is a ValueError (a
    misspelt name in the core, caught where the message is written)."""
    token = f"`{name}`"
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"{name!r} is not a setting that messages can name")
    return token


def named_settings(text: str) -> tuple[str, ...]:
    """The settings `text` names (its `setting` tokens), each once, in order."""
    return tuple(dict.fromkeys(m["name"] for m in _TOKEN.finditer(text)))


def render_settings(text: str, surface: Surface) -> str:
    """`text` with each `setting` token spelled as `surface` sets that setting."""
    return _TOKEN.sub(lambda m: f"`{spelling(m['name'], surface)}`", text)


def spelling(name: str, surface: Surface) -> str:
    """How `surface` sets setting `name` (a name `setting` accepts)."""
    base, _, key = name.partition(".")
    if surface == "check":
        if key:
            return _CHECK_KEYS.get(key) or f"--provider-kwargs '{{\"{key}\": ...}}'"
        return _EPISODE.get(base) or _TASKSET.get(base) or base
    path = name.replace("_", "-")
    if surface == "vf04":
        return f"--env.taskset.{path}"
    return f"--taskset.task.user.{path}" if base in _EPISODE else f"--taskset.{path}"
