"""`provider_kwargs` read into a launcher's own options: one reader for every place.

A launcher declares its keys as a pydantic model (`extra="forbid"`, each field with
a docstring); `read_options` reads `provider_kwargs` into it over the defaults of the
env folder's `openenv.yaml` (`manifest.manifest_defaults`), a launcher that does not
run uv dropping the UV keys (`UVOptions`) it lacks with a warning; anything else
unknown or invalid is an `EnvFailure` naming each problem and the known keys.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

OptionsT = TypeVar("OptionsT", bound=BaseModel)


class UVOptions(BaseModel):
    """The UV keys of `provider_kwargs`."""

    model_config = ConfigDict(extra="forbid")

    project_path: str | None = None
    """The env's source checkout (a uv project), or a `git+` URL; unset, the
    Space's repository (`git+https://huggingface.co/spaces/<env>`)."""
    app: str | None = None
    """The ASGI app uvicorn serves (`<pkg>.server.app:app`); unset, the candidates
    the project's own files name are tried in turn."""
    host: str = "127.0.0.1"
    """Address uvicorn binds (a wildcard one is reached at 127.0.0.1)."""
    port: int | None = None
    """Port uvicorn binds; unset, a free one (another if it is taken first)."""
    workers: int = Field(1, ge=1)
    """uvicorn's worker processes."""
    env_vars: dict[str, str] = Field(default_factory=dict)
    """Environment variables of the server, beside its allow-list (`server_env`)."""
    reload: bool = False
    """uvicorn's `--reload`."""
    context_timeout_s: float
    """Seconds the server may take to answer `/health` (the target's
    `launch_timeout_s` unless set)."""
    web_ui: bool
    """Let the server import gradio (the target's `web_ui` unless set)."""


def drop_uv_options(
    kwargs: Mapping[str, Any], known: Collection[str], launcher: str, because: str
) -> dict[str, Any]:
    """`kwargs` without the `UVOptions` keys not in `known`, with a warning that
    `launcher` launches ignore them (`because`)."""
    ignored = sorted((UVOptions.model_fields.keys() - set(known)) & kwargs.keys())
    if ignored:
        logger.warning(
            "%s launches ignore %s %s (%s)",
            launcher,
            setting("provider_kwargs"),
            ", ".join(ignored),
            because,
        )
    return {k: v for k, v in kwargs.items() if k not in ignored}


def read_options(
    model: type[OptionsT],
    provider_kwargs: Mapping[str, Any],
    launcher: str,
    where: str,
    *,
    because: str | None = None,
) -> OptionsT:
    """`provider_kwargs` over the manifest's defaults, read as `model`; with
    `because`, UV keys `model` lacks are dropped (`drop_uv_options`). An unknown or
    invalid key raises `EnvFailure` "bad `launcher` option in `where`: ..." naming
    each problem and every field of `model`."""
    from openenv_v1.core.manifest import manifest_defaults

    kwargs = {
        **manifest_defaults(model.model_fields, provider_kwargs),
        **provider_kwargs,
    }
    if because is not None:
        kwargs = drop_uv_options(kwargs, model.model_fields, launcher, because)
    try:
        return model(**kwargs)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or where}: {err['msg']}"
            for err in e.errors()
        )
        raise EnvFailure(
            f"bad {launcher} option in {where}: {problems} (known: "
            f"{', '.join(model.model_fields)})"
        ) from None


__all__ = ["OptionsT", "UVOptions", "drop_uv_options", "read_options"]
