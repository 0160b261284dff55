"""Settings named in the core's messages, by their own names; each surface spells them.

A message names a setting through `setting(name)`, a token in backticks
(`` `launch_timeout_s` ``) that reads well as it is and that the surface showing the
message turns into its own syntax with `render_settings(text, surface)`. A `Surface`
is its binding's (`vf02/flags.py`, `vf04/flags.py`, `cli/flags.py`); the core knows
none. The token travels in the text itself (a shared server's failure sent to a 0.2
user simulator, a launched server's own output), and may carry the value to set
(`setting("provider_kwargs.egress", True)`), rendered as the surface's flag given it.

    raise EnvFailure(f"... raise {setting('launch_timeout_s')} if it is just slow")
    render_settings(str(failure), CHECK_FLAGS)  # "... raise `--launch-timeout` if ..."
    named_settings(str(failure))                 # ("launch_timeout_s",)
"""

from __future__ import annotations

import json
import re
import shlex
from abc import ABC, abstractmethod
from typing import Any

__all__ = [
    "SETTINGS",
    "Surface",
    "named_settings",
    "render_settings",
    "setting",
    "shell_word",
]

SETTINGS: frozenset[str] = frozenset(
    {
        # How a launched env server is set up, and the limits of an episode.
        "provider_kwargs",
        "forward_env",
        "server_web_ui",
        "launch_timeout_s",
        "reset_timeout_s",
        "step_timeout_s",
        "episode_timeout_s",
        # Which env, where its servers run, and how many.
        "env",
        "base_url",
        "provider",
        "use_docker",
        "max_servers",
    }
)
"""The settings a message can name (besides `provider_kwargs.<key>`): the fields of
`openenv_v1.settings` that the core's messages name."""

_KEY = r"[a-z][a-z0-9_]*"
_TOKEN = re.compile(
    rf"`(?P<name>provider_kwargs\.{_KEY}|"
    + "|".join(sorted(map(re.escape, SETTINGS), key=len, reverse=True))
    + r")(?: = (?P<value>[^`]+))?`"
)
_NO_VALUE = object()


class Surface(ABC):
    """How one surface (a command's flags) sets the settings the core names; its
    binding defines it, and passes it to `render_settings` where it shows a message.
    A name given to its methods is one `setting` accepts."""

    @abstractmethod
    def flag(self, name: str) -> str:
        """How this surface sets setting `name`."""

    def flag_given(self, name: str, value: Any) -> str:
        """How this surface sets `name` to `value`: its flag, then the value as one
        shell word (`shell_word`)."""
        return f"{self.flag(name)} {shell_word(value)}"


def setting(name: str, value: Any = _NO_VALUE) -> str:
    """The token naming setting `name` in a message (`` `name` ``), or naming it set
    to `value` (`` `name = <value as JSON>` ``). `name` is one of `SETTINGS`, or
    `provider_kwargs.<key>`; anything else is a ValueError (a misspelt name in the
    core, caught where the message is written)."""
    token = f"`{name}`" if value is _NO_VALUE else f"`{name} = {json.dumps(value)}`"
    if not _TOKEN.fullmatch(token):
        raise ValueError(f"{name!r} is not a setting that messages can name")
    return token


def named_settings(text: str) -> tuple[str, ...]:
    """The settings `text` names (its `setting` tokens), each once, in order."""
    return tuple(dict.fromkeys(m["name"] for m in _TOKEN.finditer(text)))


def render_settings(text: str, surface: Surface) -> str:
    """`text` with each `setting` token spelled as `surface` sets that setting (to
    the token's value, if it has one)."""

    def spelled(m: re.Match[str]) -> str:
        if m["value"] is None:
            return f"`{surface.flag(m['name'])}`"
        return f"`{surface.flag_given(m['name'], _json_or_text(m['value']))}`"

    return _TOKEN.sub(spelled, text)


def shell_word(value: Any) -> str:
    """`value` as one word of a shell command line: a string as it is, anything
    else as JSON, quoted where the shell needs it."""
    return shlex.quote(value if isinstance(value, str) else json.dumps(value))


def _json_or_text(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value  # written by hand, not JSON: shown as it is
