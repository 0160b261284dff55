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
quotes the stand-in gradio's message. A token may carry the value to set
(`setting("provider_kwargs.egress", True)`: `` `provider_kwargs.egress = true` ``),
rendered as the flag given that value. A token for a setting `check` has no flag for
stays as it is there (`check` runs no rollout); a `provider_kwargs` key without a
flag of its own is rendered as the `--provider-kwargs` JSON that sets it.

    raise EnvFailure(f"... raise {setting('launch_timeout_s')} if it is just slow")
    render_settings(str(failure), "check")  # "... raise `--launch-timeout` if ..."
    named_settings(str(failure))             # ("launch_timeout_s",)
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Literal

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
# `provider_kwargs` keys `check` has a flag for, and its flags that take no value.
_CHECK_KEYS = {"app": "--app", "project_path": "--project-path"}
_CHECK_SWITCHES = {"--web-ui", "--use-docker"}

_KEY = r"[a-z][a-z0-9_]*"
_TOKEN = re.compile(
    rf"`(?P<name>provider_kwargs\.{_KEY}|"
    + "|".join(sorted(map(re.escape, {*_EPISODE, *_TASKSET}), key=len, reverse=True))
    + r")(?: = (?P<value>[^`]+))?`"
)
_NO_VALUE = object()


def setting(name: str, value: Any = _NO_VALUE) -> str:
    """The token naming setting `name` in a message (`` `name` ``), or naming it set
    to `value` (`` `name = <value as JSON>` ``). `name` is one of the settings above,
    or `provider_kwargs.<key>`; anything else is a ValueError (a misspelt name in the
    core, caught where the message is written)."""
    token = f"`{name}`" if value is _NO_VALUE else f"`{name} = {json.dumps(value)}`"
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"{name!r} is not a setting that messages can name")
    return token


def named_settings(text: str) -> tuple[str, ...]:
    """The settings `text` names (its `setting` tokens), each once, in order."""
    return tuple(dict.fromkeys(m["name"] for m in _TOKEN.finditer(text)))


def render_settings(text: str, surface: Surface) -> str:
    """`text` with each `setting` token spelled as `surface` sets that setting."""

    def spelled(m: re.Match[str]) -> str:
        value = _NO_VALUE if m["value"] is None else _json_or_text(m["value"])
        return f"`{spelling(m['name'], surface, value)}`"

    return _TOKEN.sub(spelled, text)


def spelling(name: str, surface: Surface, value: Any = _NO_VALUE) -> str:
    """How `surface` sets setting `name` (a name `setting` accepts), to `value` if
    given."""
    base, _, key = name.partition(".")
    given = value is not _NO_VALUE
    if surface == "check":
        flag = _CHECK_KEYS.get(key) if key else _EPISODE.get(base) or _TASKSET.get(base)
        if key and flag is None:
            shown = json.dumps({key: value}) if given else f'{{"{key}": ...}}'
            return f"--provider-kwargs '{shown}'"
        flag = flag or base
    elif surface == "vf04":
        flag = f"--env.taskset.{name.replace('_', '-')}"
    else:
        under = "task.user." if base in _EPISODE else ""
        flag = f"--taskset.{under}{name.replace('_', '-')}"
    if not given or (value is True and flag in _CHECK_SWITCHES):
        return flag
    return (
        f"{flag} {shlex.quote(value if isinstance(value, str) else json.dumps(value))}"
    )


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value  # written by hand, not JSON: shown as it is
