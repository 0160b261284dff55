"""`provider_kwargs` read into a launcher's own options: one reader for every place.

A launcher declares what it may be given as a pydantic model (`extra="forbid"`,
each field with a docstring). `read_options` reads a target's `provider_kwargs`
into it, over the defaults the env folder's `openenv.yaml` declares for the
model's fields (`manifest.manifest_defaults`; what is set wins). Keys in `ignore`
are dropped with a warning saying why (an image launcher ignores a UV launch's
options); anything else unknown or invalid is an `EnvFailure` naming each problem
and the known keys:

    options = read_options(DockerOptions, target.provider_kwargs, "Docker",
        "provider_kwargs", ignore=UV_ONLY_OPTIONS,
        because="the image runs its own command")
    # EnvFailure: bad Docker option in provider_kwargs: memroy: Extra inputs are
    #   not permitted (known: image, tag, ...)

Imports `openenv_v1.core.errors` and `openenv_v1.core.manifest` (when called).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.setting_names import setting

logger = logging.getLogger(__name__)

OptionsT = TypeVar("OptionsT", bound=BaseModel)


def read_options(
    model: type[OptionsT],
    provider_kwargs: Mapping[str, Any],
    launcher: str,
    where: str,
    *,
    ignore: Collection[str] = (),
    because: str = "",
) -> OptionsT:
    """`provider_kwargs` over the manifest's defaults, read as `model`. Keys in
    `ignore` are dropped, with a warning that `launcher` launches ignore them
    (`because`); an unknown or invalid one raises `EnvFailure` "bad `launcher`
    option in `where`: ..." naming each problem and every field of `model`."""
    from openenv_v1.core.manifest import manifest_defaults

    kwargs = {
        **manifest_defaults(model.model_fields, provider_kwargs),
        **provider_kwargs,
    }
    ignored = sorted(set(ignore) & kwargs.keys())
    if ignored:
        logger.warning(
            "%s launches ignore %s %s (%s)",
            launcher,
            setting("provider_kwargs"),
            ", ".join(ignored),
            because,
        )
    for key in ignored:
        kwargs.pop(key)
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


__all__ = ["OptionsT", "read_options"]
