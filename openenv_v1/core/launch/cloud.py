"""OpenEnv's cloud sandbox providers as launchers: Daytona, Modal, Azure Container
Apps, Hugging Face sandboxes, Novita.

`CloudLaunch` constructs OpenEnv's provider class with the constructor options
declared in `CLOUD_PROVIDERS` and drives it (`start_container` gets `image`, `port`,
`env_vars` with `secret_env`, and `cmd`); `stop()` tears the sandbox down, also for
a start still under way. `preflight` fails before any rollout when the installed
openenv lacks the class (openenv-core 0.3.0 has only Daytona's) or its SDK, naming
what to install. Never run against a real cloud from this repository: the tests
drive the real classes with recording stand-ins for their SDKs.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openenv_v1.core.errors import EnvFailure, describe, redact
from openenv_v1.core.launch.env_target import LAUNCH_TIMEOUT_S
from openenv_v1.core.launch.options import drop_uv_options
from openenv_v1.core.launch.plan import LaunchPlan, run_here
from openenv_v1.core.light_import import without_gradio
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

logger = logging.getLogger(__name__)

_RUNTIME = "openenv.core.containers.runtime"
_START_KEYS = ("image", "port", "env_vars", "cmd")
"""Keys of `provider_kwargs` that go to `start_container`, not the constructor."""


@dataclass(frozen=True)
class CloudProvider:
    """One of OpenEnv's cloud providers: its class, the SDK it needs and how to
    install it, and the variables the SDK reads its credentials from."""

    name: str
    cls: str
    options: str
    """The constructor's arguments `provider_kwargs` may set, space-separated."""
    sdk: tuple[str, ...]
    install: str
    variables: tuple[str, ...]
    credentials: tuple[str, ...] = ()
    """Constructor arguments that take a credential. Refused naming `variables`:
    a key set there would be saved with the eval's config and results."""
    sdk_attr: str | None = None
    """An attribute of the SDK's first module the class needs (a newer SDK)."""

    @property
    def module(self) -> str:
        return f"{_RUNTIME}.{self.name}_provider"

    @property
    def keys(self) -> list[str]:
        """The keys of `provider_kwargs` its launch takes."""
        return [*_START_KEYS, *self.options.split()]


CLOUD_PROVIDERS: dict[str, CloudProvider] = {
    "daytona": CloudProvider(
        "daytona",
        "DaytonaProvider",
        "public resources auto_stop_interval target on_snapshot_create_logs "
        "create_timeout",
        ("daytona", "yaml"),
        "pip install 'daytona>=0.136' pyyaml (openenv's `daytona` extra)",
        ("DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_TARGET"),
        ("api_key",),
    ),
    "modal": CloudProvider(
        "modal",
        "ModalProvider",
        "app_name use_sandbox_v2 timeout cpu memory surface_server_logs",
        ("modal", "yaml"),
        "pip install 'modal>=1.4' pyyaml (openenv's `modal` extra)",
        ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),
    ),
    "aca": CloudProvider(
        "aca",
        "ACASandboxProvider",
        "subscription_id resource_group sandbox_group region endpoint cpu memory "
        "disk_size auto_suspend_seconds auto_suspend_mode labels egress_policy "
        "anonymous_port working_directory surface_server_logs create_timeout "
        "polling_interval sdk_kwargs",
        ("azure.containerapps.sandbox", "azure.identity"),
        "pip install 'azure-containerapps-sandbox>=0.1.0b2,<0.2' 'azure-identity>=1.23' "
        "(openenv's `aca` extra)",
        (
            "AZURE_SUBSCRIPTION_ID",
            "AZURE_RESOURCE_GROUP",
            "AZURE_SANDBOX_GROUP",
            "AZURE_REGION",
            "AZURE_CLIENT_ID",
            "AZURE_TENANT_ID",
            "AZURE_CLIENT_SECRET",
        ),
        ("credential",),
    ),
    "hf_sandbox": CloudProvider(
        "hf_sandbox",
        "HFSandboxProvider",
        "flavor",
        ("huggingface_hub",),
        "pip install -U huggingface_hub (a version with SandboxPool)",
        ("HF_TOKEN",),
        sdk_attr="SandboxPool",
    ),
    "novita": CloudProvider(
        "novita",
        "NovitaSandboxProvider",
        "domain timeout metadata secure working_directory surface_server_logs "
        "cpu_count memory_mb template_name on_build_logs",
        ("novita_sandbox",),
        "pip install 'novita-sandbox>=2.1.1' (openenv's `novita` extra)",
        ("NOVITA_API_KEY", "NOVITA_DOMAIN"),
        ("api_key",),
    ),
}


def _installed_openenv() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("openenv", "openenv-core"):
        with contextlib.suppress(PackageNotFoundError):
            return f"{dist} {version(dist)}"
    return "openenv"


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package is missing
        return False


def preflight(target: EnvTarget) -> None:
    """Fail, naming what to install, when `target`'s provider cannot be used here:
    the installed openenv has no such class, or its SDK is not installed."""
    spec = CLOUD_PROVIDERS[target.launcher]
    if not _has_module(spec.module):
        raise EnvFailure(
            f"provider {spec.name!r} needs OpenEnv's {spec.cls}, which "
            f"{_installed_openenv()} does not have: it ships with openenv 0.10; with "
            f"this openenv, set {setting('provider')} to daytona, swarm, docker or "
            "uv"
        )
    missing = [name for name in spec.sdk if not _has_module(name)]
    if not missing and spec.sdk_attr:
        module = importlib.import_module(spec.sdk[0])
        if not hasattr(module, spec.sdk_attr):
            missing = [f"{spec.sdk[0]}.{spec.sdk_attr}"]
    if missing:
        raise EnvFailure(
            f"provider {spec.name!r} needs its SDK ({', '.join(missing)} is not "
            f"installed): {spec.install}, and set {', '.join(spec.variables)} as "
            "its docs say"
        )


def provider_class(spec: CloudProvider) -> type[Any]:
    """OpenEnv's class for `spec`, imported (its module imports no SDK at import)."""
    with without_gradio():
        module = importlib.import_module(spec.module)
    return getattr(module, spec.cls)


def _check_options(spec: CloudProvider, kwargs: Mapping[str, Any]) -> None:
    """Raise `EnvFailure` for a credential or a key `spec`'s launch does not take."""
    for key in kwargs:
        if key in spec.credentials:
            raise EnvFailure(
                f"{setting(f'provider_kwargs.{key}')} would put a credential in the "
                f"config: drop it, and set {', '.join(spec.variables)} in the eval's "
                f"environment instead ({spec.cls} reads them there)"
            )
    unknown = [key for key in kwargs if key not in spec.keys]
    if unknown:
        problems = "; ".join(f"{key}: not an option of {spec.cls}" for key in unknown)
        raise EnvFailure(
            f"bad {spec.cls} option in {setting('provider_kwargs')}: {problems} "
            f"(known: {', '.join(spec.keys)})"
        )


class CloudLaunch:
    """One env server in a sandbox of OpenEnv's `spec` provider (the module
    docstring). Thread-safe; `stop()` is idempotent and no start follows it."""

    def __init__(
        self,
        *,
        spec: CloudProvider,
        env: str,
        image: str | None,
        options: Mapping[str, Any],
        secret_env: Mapping[str, str] | None = None,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
    ) -> None:
        self.spec = spec
        self.env = env
        self.image = image
        self.options = dict(options)
        self.launch_timeout_s = launch_timeout_s
        self._secret_env = dict(secret_env or {})
        self.app_choice = None  # the sandbox runs the image's own server command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = run_here
        self.provider: Any = None  # OpenEnv's provider object, once made
        self._url: str | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def start(self, **start_args: Any) -> str:
        """Construct OpenEnv's provider and start its sandbox; returns its URL."""
        cls = provider_class(self.spec)
        env_vars = {**(start_args.pop("env_vars", None) or {}), **self._secret_env}
        with self._lock:
            if self._stopped:
                raise EnvFailure(f"the {self.spec.cls} launch was stopped")
        try:
            provider = cls(**self.options)
            with self._lock:
                self.provider = provider
            url = provider.start_container(
                self.image, env_vars=env_vars or None, **start_args
            )
        except Exception as e:
            raise EnvFailure(f"{self.spec.cls}: {describe(e)}") from None
        with self._lock:
            stopped = self._stopped
            self._url = None if stopped else url
        if stopped:  # stop() ran while the sandbox was being made: end it now
            self._teardown(provider)
            raise EnvFailure(f"the {self.spec.cls} launch was stopped")
        logger.info("%s: %s sandbox started", self.env, self.spec.cls)
        return url

    def wait_for_ready(self) -> str:
        """OpenEnv's own readiness wait (`/health`, and the server's liveness where
        the provider checks it); returns the server's base URL."""
        url = self._url
        if self.provider is None or url is None:
            raise EnvFailure(f"the {self.spec.cls} launch was not started, or stopped")
        try:
            self.provider.wait_for_ready(url, timeout_s=self.launch_timeout_s)
        except Exception as e:
            raise EnvFailure(f"{self.spec.cls}: {describe(e)}") from None
        return url

    def running(self) -> bool:
        """Whether the sandbox was started and not stopped (never asks the cloud)."""
        return self._url is not None and not self._stopped

    def stop(self, grace_s: float = 2.0) -> None:
        """Tear the sandbox down; a start under way tears its own down."""
        with self._lock:
            self._stopped = True
            provider, self._url = self.provider, None
        if provider is not None:
            self._teardown(provider)

    def _teardown(self, provider: Any) -> None:
        for step in ("stop_container", "close"):
            call = getattr(provider, step, None)
            if call is None:
                continue
            try:
                call()
            except Exception as e:
                logger.warning(
                    "%s: %s.%s() failed: %s",
                    self.env,
                    self.spec.cls,
                    step,
                    redact(describe(e), self._secret_env.values()),
                )

    def log_tail(self, chars: int = 0) -> str:
        """Sandboxes' output stays in the cloud (the providers withhold it)."""
        return ""


def cloud_launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of a `CloudLaunch` for `target` (`target.launcher` one of
    `CLOUD_PROVIDERS`). Raises `EnvFailure` for a bad option, before anything is
    created."""
    assert target.env is not None
    spec = CLOUD_PROVIDERS[target.launcher]
    because = "a sandbox runs its image's server"
    kwargs = drop_uv_options(target.provider_kwargs, spec.keys, spec.cls, because)
    image = kwargs.get("image")
    if not image:
        example = (
            "hf.co/spaces/<owner>/<env> (an image with a `server` command)"
            if spec.name == "hf_sandbox"
            else f"the sandbox's image or source, as {spec.cls}.start_container "
            "takes it"
        )
        raise EnvFailure(
            f"provider {spec.name!r} needs {setting('provider_kwargs.image')}: "
            f"{example}"
        )
    _check_options(spec, kwargs)
    options = {k: v for k, v in kwargs.items() if k not in _START_KEYS}
    start_args = {k: kwargs[k] for k in _START_KEYS[1:] if k in kwargs}
    if spec.name == "hf_sandbox":
        options["image"] = image  # its constructor requires it
    return LaunchPlan(
        CloudLaunch(
            spec=spec,
            env=target.env,
            image=image,
            options=options,
            secret_env=target.secret_env,
            launch_timeout_s=target.launch_timeout_s,
        ),
        start_args,
    )
