"""How `openenv-v1 check` spells the settings (`core.setting_names`), and its options
for them, made from the settings' own fields (`openenv_v1.settings`): a setting's flag
is `--<its name in kebab case>` unless `_FLAGS` says otherwise, and its type,
default and `--help` text are the field's. A `provider_kwargs` key without a flag of
its own is the `--provider-kwargs` JSON that sets it; a setting `check` has no flag
for (it runs no rollout: `episode_timeout_s`, `max_servers`; `env` is its `ENV_ID`
argument) is written as the token writes it (`max_servers = 1`).

    add_setting_flags(check_parser)             # --launch-timeout, --timeout, ...
    EpisodeSettings(**given_settings(args, EpisodeSettings))
    render_settings(str(failure), CHECK_FLAGS)  # "raise `--launch-timeout` if ..."
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from openenv_v1.core.setting_names import Surface, render_settings
from openenv_v1.settings import EnvSettings, EpisodeSettings

__all__ = [
    "CHECK_FLAGS",
    "CheckFlags",
    "add_setting_flags",
    "given_settings",
    "json_value",
]

# Each setting `check` has a flag for, in the order `--help` lists them, with its flag
# where that is not `--<the name in kebab case>`. `base_url`'s flag is check's own
# (it checks each server given); the others are made from the fields here.
_FLAGS: dict[str, str | None] = {
    "base_url": None,
    "use_docker": None,
    "provider": None,
    "provider_kwargs": None,
    "forward_env": None,
    "server_web_ui": "--web-ui",
    "launch_timeout_s": "--launch-timeout",
    "reset_timeout_s": "--timeout",
    "step_timeout_s": "--timeout",
    "capacity_wait_s": "--timeout",
    "observation_images": "--no-observation-images",
    "max_observation_chars": None,
}
_MADE = tuple(_FLAGS)[1:]
# `--help` of a flag that sets several settings (the first one's type and default).
_HELP = {"--timeout": "seconds per reset, step, capacity wait and HTTP call"}
# `provider_kwargs` keys `check` has a flag for.
_KEYS = {"app": "--app", "project_path": "--project-path"}
_FIELDS: dict[str, FieldInfo] = EnvSettings.model_fields | EpisodeSettings.model_fields


def setting_flag(name: str) -> str | None:
    """`check`'s flag for setting `name`; None when it has none."""
    return _flag(name) if name in _FLAGS else None


def _flag(name: str) -> str:
    return _FLAGS[name] or f"--{name.replace('_', '-')}"


def _dest(flag: str) -> str:
    return flag.removeprefix("--").removeprefix("no-").replace("-", "_")


def json_value(flag: str, kind: type[dict] | type[list]):
    """An argparse `type` reading JSON of `kind` (an object or a list), its errors
    naming `flag`."""
    noun = "object" if kind is dict else "list"

    def parse(text: str) -> Any:
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise argparse.ArgumentTypeError(f"{flag} is not valid JSON: {e}") from e
        if not isinstance(value, kind):
            raise argparse.ArgumentTypeError(f"{flag} must be a JSON {noun}")
        return value

    return parse


def _option(flag: str, name: str, field: FieldInfo) -> dict[str, Any]:
    """argparse's keywords for `flag`, which sets setting `name` (`field`)."""
    kind = field.annotation
    if kind is bool:
        return {"action": "store_false" if flag.startswith("--no-") else "store_true"}
    if get_origin(kind) is dict:
        return {"type": json_value(flag, dict), "default": {}, "metavar": "JSON"}
    if get_origin(kind) is list:
        return {"action": "append", "default": [], "metavar": "NAME"}
    if literal := [a for a in get_args(kind) if get_origin(a) is Literal]:
        return {"choices": get_args(literal[0])}
    return {
        "type": kind,
        "default": field.default,
        "metavar": "S" if name.endswith("_s") else "N",
    }


def _help(flag: str, name: str, option: dict[str, Any]) -> str:
    text = _HELP.get(flag) or " ".join((_FIELDS[name].description or "").split())
    if flag.startswith("--no-"):
        text = f"turns off `{name}`: {text}"
    if option.get("action") == "append":
        text += " Repeat the flag for more."
    text = render_settings(text, CHECK_FLAGS).replace("%", "%%")
    return f"{text} (default %(default)s)" if "type" in option else text


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """`parser`'s option for each setting `check` has a flag for but `--base-url`:
    the field's type, default and docstring; a flag that sets several settings
    takes the first one's."""
    made: set[str] = set()
    for name in _MADE:
        if (flag := _flag(name)) in made:
            continue
        made.add(flag)
        option = _option(flag, name, _FIELDS[name])
        help_text = _help(flag, name, option)
        parser.add_argument(flag, dest=_dest(flag), help=help_text, **option)


def given_settings(args: argparse.Namespace, model: type[BaseModel]) -> dict[str, Any]:
    """The settings of `model` that `check`'s flags made here set, by name."""
    return {
        name: getattr(args, _dest(_flag(name)))
        for name in _MADE
        if name in model.model_fields
    }


class CheckFlags(Surface):
    """`openenv-v1 check`'s command line."""

    def flag(self, name: str) -> str:
        base, _, key = name.partition(".")
        if not key:
            return setting_flag(base) or base
        return _KEYS.get(key) or f"--provider-kwargs '{{\"{key}\": ...}}'"

    def flag_given(self, name: str, value: Any) -> str:
        key = name.partition(".")[2]
        if key and key not in _KEYS:
            return f"--provider-kwargs '{json.dumps({key: value})}'"
        flag = self.flag(name)
        if flag == name:  # no flag: as the token writes it
            return f"{name} = {json.dumps(value)}"
        if value is True and name in _FIELDS and _FIELDS[name].annotation is bool:
            return flag  # a switch
        return super().flag_given(name, value)


CHECK_FLAGS = CheckFlags()
"""The surface `check` renders the settings its failures name with."""
