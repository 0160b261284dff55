"""What an env folder's `openenv.yaml` declares, as far as running it goes.

Read on both OpenEnv lines (openenv-core 0.3.0 has no `openenv.validation`) with
`yaml.safe_load` and a lenient model of OpenEnv's field names: unknown fields are
ignored, a field of the wrong type is an error naming it.

    validation:
      reward: {range: [0, 1]}
      resources: {cpu: 1, memory_mb: 512, disk_mb: 1024, episode_timeout_s: 300}
      network: {mode: no-network}            # public | no-network | allowlist
      execution: {requires_credentials: [OPENAI_API_KEY]}   # or `true`

`episode_timeout_s` is the default episode budget; `resources` the default limits of
a container launch; `no-network` runs the container without egress; a reward outside
`reward.range` is flagged; `requires_credentials` (OpenEnv's is a bool; a list of
names is read too) is checked against `forward_env` before anything runs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from openenv_v1.core.errors import field_errors
from openenv_v1.core.setting_names import setting

MANIFEST = "openenv.yaml"


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Resources(_Lenient):
    cpu: float | None = Field(None, gt=0)
    memory_mb: int | None = Field(None, gt=0)
    disk_mb: int | None = Field(None, gt=0)
    episode_timeout_s: float | None = Field(None, gt=0)
    gpus: int = Field(0, ge=0)


class Network(_Lenient):
    mode: Literal["public", "no-network", "allowlist"] = "public"
    allowed_hosts: list[str] = []


class RewardRange(_Lenient):
    range: tuple[float, float] | None = None

    @field_validator("range")  # called by pydantic
    @classmethod
    def _increasing(cls, value: tuple[float, float] | None) -> Any:
        if value is not None and not (
            math.isfinite(value[0]) and math.isfinite(value[1]) and value[0] < value[1]
        ):
            raise ValueError(f"reward range must be finite and increasing, got {value}")
        return value


class Execution(_Lenient):
    requires_credentials: bool | list[str] = False


class Manifest(_Lenient):
    """The `validation:` block of an `openenv.yaml`."""

    path: str = ""
    """The file it was read from."""
    reward: RewardRange = RewardRange()
    resources: Resources = Resources()
    network: Network = Network()
    execution: Execution = Execution()

    def missing_credentials(
        self, forward_env: Sequence[str], environ: Any = os.environ
    ) -> list[str] | None:
        """The declared credentials the eval will not hand the server: names not in
        `forward_env` or not set in `environ`. `[]`: all there; None: the manifest
        declares credentials without names and `forward_env` is empty."""
        need = self.execution.requires_credentials
        if need is True:
            return None if not forward_env else []
        if not need:
            return []
        return [n for n in need if n not in forward_env or n not in environ]

    def container_limits(self) -> dict[str, Any]:
        """Default container options of a launch: `cpus`, `memory` (Docker's string
        form), and `egress: False` for `no-network` (taken by a launcher whose
        options have an `egress` switch)."""
        limits: dict[str, Any] = {}
        if self.resources.cpu is not None:
            limits["cpus"] = self.resources.cpu
        if self.resources.memory_mb is not None:
            limits["memory"] = f"{self.resources.memory_mb}m"
        if self.network.mode == "no-network":
            limits["egress"] = False
        return limits


class ManifestError(ValueError):
    """The `openenv.yaml` exists but cannot be used; the message names the field."""


def read_manifest(folder: str | os.PathLike[str] | None) -> Manifest | None:
    """The manifest of the env folder `folder`, or None when it has no `openenv.yaml`
    or the file has no `validation:` block. A malformed one is a `ManifestError`."""
    if not folder:
        return None
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise ManifestError(f"{path} cannot be read as YAML: {e}") from e
    if not isinstance(raw, dict) or raw.get("validation") is None:
        return None
    block = raw["validation"]
    if not isinstance(block, dict):
        raise ManifestError(f"{path}: `validation:` must be a mapping")
    try:
        return Manifest.model_validate({**block, "path": str(path)})
    except ValidationError as e:
        fields = field_errors(e.errors(), "validation.")
        raise ManifestError(f"{path}: {fields}") from None


def credentials_error(manifest: Manifest, forward_env: Sequence[str]) -> str | None:
    """The error for credentials the manifest declares and the eval will not pass
    (None: nothing missing), naming `forward_env` by token."""
    flag = setting("forward_env")
    missing = manifest.missing_credentials(forward_env)
    if missing == []:
        return None
    if missing is None:
        return (
            f"{manifest.path} declares requires_credentials, but {flag} names none: "
            "add the variables the env needs (exported in the eval's environment)"
        )
    return (
        f"{manifest.path} declares credentials {', '.join(missing)}, which the eval "
        f"does not pass: export {'them' if len(missing) > 1 else 'it'} and add "
        f"{'them' if len(missing) > 1 else 'it'} to {flag}"
    )


def manifest_defaults(fields: Any, provider_kwargs: Any) -> dict[str, Any]:
    """The container limits the manifest of the env's local folder declares, for the
    launcher options named in `fields`; none from a manifest that cannot be read."""
    try:
        manifest = read_manifest(local_project_dir(provider_kwargs))
    except ManifestError:
        return {}
    if manifest is None:
        return {}
    return {k: v for k, v in manifest.container_limits().items() if k in fields}


def local_project_dir(provider_kwargs: Mapping[str, Any]) -> str | None:
    """The env's local folder: `provider_kwargs["project_path"]` when it names an
    existing folder (not a `git+` URL), for any launcher; else None."""
    path = provider_kwargs.get("project_path")
    if isinstance(path, str) and not path.startswith("git+") and os.path.isdir(path):
        return path
    return None


__all__ = [
    "Manifest",
    "ManifestError",
    "credentials_error",
    "local_project_dir",
    "manifest_defaults",
    "read_manifest",
]
