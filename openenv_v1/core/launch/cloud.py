"""OpenEnv's cloud sandbox providers behind the launcher face: Daytona, Modal, Azure
Container Apps, Hugging Face sandboxes, Novita.

Each runs one env server in a sandbox of its cloud through OpenEnv's own provider
class (`DaytonaProvider`, `ModalProvider`, `ACASandboxProvider`, `HFSandboxProvider`,
`NovitaSandboxProvider`). `CloudLaunch` constructs that class with the options of
`provider_kwargs`, and drives it as a rollout needs:

    launch = cloud_launch_plan(EnvTarget(env="org/maze", provider="modal",
        provider_kwargs={"image": "ghcr.io/org/maze:1", "cpu": 2})).launcher
    launch.start()            # ModalProvider(cpu=2).start_container(image, env_vars=...)
    launch.wait_for_ready()   # its wait_for_ready(url, timeout_s=launch_timeout_s): url
    launch.stop()             # its stop_container(), then close()

- `image` (the sandbox's image or source, in the provider's own spelling) is given to
  `start_container`, as are `port`, `env_vars` and `cmd`; every other key is an
  option of the class's constructor. They are read as every place reads its own
  (`launch.options.read_options`), by a model of those keys and the constructor's
  arguments: an unknown one fails naming it and the known ones.
- Credentials are never options: each SDK reads its own variables (`variables`
  below) from the environment of the process that launches. Constructor arguments
  that would carry one (`api_key`, `credential`) are refused, naming the variable.
- `secret_env` (the values of `forward_env`) joins `env_vars` for the server in the
  sandbox; no message of this module carries a value of it.
- `stop()` tears the sandbox down however the launch ends: a start that is still
  under way when `stop()` runs (a cancelled rollout) tears its own sandbox down as
  soon as the SDK returns it.

`preflight(target)` fails before any rollout when the installed openenv lacks the
class (openenv-core 0.3.0, the verifiers 0.4 line, has only Daytona's) or the SDK is
not installed, naming what to install. Nothing here has run against a real cloud from
this repository: the tests drive the real classes with their SDKs replaced by
recording stand-ins.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, create_model

from openenv_v1.core.errors import EnvFailure, describe, redact
from openenv_v1.core.launch.env_target import LAUNCH_TIMEOUT_S
from openenv_v1.core.launch.options import read_options
from openenv_v1.core.launch.plan import LaunchPlan, run_here
from openenv_v1.core.light_import import without_gradio
from openenv_v1.core.setting_names import setting

if TYPE_CHECKING:
    from openenv_v1.core.launch.env_target import EnvTarget

logger = logging.getLogger(__name__)

_RUNTIME = "openenv.core.containers.runtime"
# Keys of `provider_kwargs` that go to `start_container`, not the constructor.
_START_KEYS = ("port", "env_vars", "cmd")
# Keys of a UV or Docker launch that mean nothing to a sandbox.
_LOCAL_ONLY = frozenset(
    {"app", "project_path", "workers", "reload", "host", "context_timeout_s", "web_ui"}
)


@dataclass(frozen=True)
class CloudProvider:
    """One of OpenEnv's cloud providers: where its class is, which SDK it needs and
    how to install it, and the variables its SDK reads its credentials from."""

    name: str
    module: str
    cls: str
    sdk: tuple[str, ...]
    """Modules the SDK must provide (the class imports them as it runs)."""
    install: str
    variables: tuple[str, ...]
    """Variables the SDK reads its credentials and placement from."""
    credential_options: tuple[str, ...] = ()
    """Constructor arguments that would put a credential in the config: refused."""
    sdk_attr: str | None = None
    """An attribute of the SDK's first module the class needs (a newer SDK)."""

    @property
    def where(self) -> str:
        return f"{self.module}.{self.cls}"


CLOUD_PROVIDERS: dict[str, CloudProvider] = {
    "daytona": CloudProvider(
        "daytona",
        f"{_RUNTIME}.daytona_provider",
        "DaytonaProvider",
        ("daytona", "yaml"),
        "pip install 'daytona>=0.136' pyyaml (openenv's `daytona` extra)",
        ("DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_TARGET"),
        ("api_key",),
    ),
    "modal": CloudProvider(
        "modal",
        f"{_RUNTIME}.modal_provider",
        "ModalProvider",
        ("modal", "yaml"),
        "pip install 'modal>=1.4' pyyaml (openenv's `modal` extra)",
        ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),
    ),
    "aca": CloudProvider(
        "aca",
        f"{_RUNTIME}.aca_provider",
        "ACASandboxProvider",
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
        f"{_RUNTIME}.hf_sandbox_provider",
        "HFSandboxProvider",
        ("huggingface_hub",),
        "pip install -U huggingface_hub (a version with SandboxPool)",
        ("HF_TOKEN",),
        sdk_attr="SandboxPool",
    ),
    "novita": CloudProvider(
        "novita",
        f"{_RUNTIME}.novita_provider",
        "NovitaSandboxProvider",
        ("novita_sandbox",),
        "pip install 'novita-sandbox>=2.1.1' (openenv's `novita` extra)",
        ("NOVITA_API_KEY", "NOVITA_DOMAIN"),
        ("api_key",),
    ),
}


def cloud_provider(target: EnvTarget) -> CloudProvider:
    spec = CLOUD_PROVIDERS.get(target.launcher)
    if spec is None:
        raise EnvFailure(
            f"provider {target.launcher!r} is not a cloud provider (known: "
            f"{', '.join(CLOUD_PROVIDERS)})"
        )
    return spec


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
    spec = cloud_provider(target)
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


def _read_options(
    spec: CloudProvider, cls: type[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The options set in `kwargs`, read (`launch.options.read_options`) as a model
    of `image`, `start_container`'s keys and `cls`'s constructor arguments: no
    credentials, no private arguments, nothing `cls` does not take (the class checks
    the values itself)."""
    for key in kwargs:
        if key in spec.credential_options:
            raise EnvFailure(
                f"{setting(f'provider_kwargs.{key}')} would put a credential in the "
                "config: drop "
                f"it, and set {', '.join(spec.variables)} in the eval's environment "
                f"instead ({spec.cls} reads them there)"
            )
    params = inspect.signature(cls.__init__).parameters
    known = sorted(
        name
        for name, p in params.items()
        if name != "self"
        and not name.startswith("_")
        and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        and name not in spec.credential_options
        and name not in ("image", "env_vars")
    )
    fields: dict[str, Any] = {
        name: (Any, None) for name in ("image", *_START_KEYS, *known)
    }
    model = create_model(
        f"{spec.cls}Options",
        __config__=ConfigDict(extra="forbid", protected_namespaces=()),
        **fields,
    )
    return read_options(model, kwargs, spec.cls, setting("provider_kwargs")).model_dump(
        exclude_unset=True
    )


class CloudLaunch:
    """One env server in a sandbox of OpenEnv's `spec` provider, with the launcher
    face `ServerPool` and `open_env` drive; see the module docstring. Thread-safe;
    `stop()` is idempotent and no start follows it."""

    def __init__(
        self,
        *,
        spec: CloudProvider,
        env: str,
        image: str | None,
        options: Mapping[str, Any],
        start_args: Mapping[str, Any],
        secret_env: Mapping[str, str] | None = None,
        launch_timeout_s: float = LAUNCH_TIMEOUT_S,
    ) -> None:
        self.spec = spec
        self.env = env
        self.image = image
        self.options = dict(options)
        self.start_args = dict(start_args)
        self.launch_timeout_s = launch_timeout_s
        self._secret_env = dict(secret_env or {})
        self.app_choice = None  # the sandbox runs the image's own server command
        self.run_on_owner: Callable[[Callable[[], Any]], Any] = run_here
        self.provider: Any = None
        """OpenEnv's provider object, once `start()` has made it."""
        self._url: str | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def start(self, **start_args: Any) -> str:
        """Construct OpenEnv's provider and start its sandbox; returns the server's
        base URL. A failure is an `EnvFailure` with no secret value in it."""
        cls = provider_class(self.spec)
        args = {**self.start_args, **start_args}
        env_vars = {**dict(args.pop("env_vars", None) or {}), **self._secret_env}
        with self._lock:
            if self._stopped:
                raise EnvFailure(f"the {self.spec.cls} launch was stopped")
        try:
            provider = cls(**self.options)
            with self._lock:
                self.provider = provider
            url = provider.start_container(
                self.image, env_vars=env_vars or None, **args
            )
        except Exception as e:
            raise EnvFailure(
                self._redacted(f"{self.spec.cls}: {describe(e)}")
            ) from None
        with self._lock:
            stopped = self._stopped
            self._url = None if stopped else url
        if stopped:  # stop() ran while the sandbox was being made: end it now
            self._teardown(provider)
            raise EnvFailure(f"the {self.spec.cls} launch was stopped")
        logger.info("%s: %s sandbox started", self.env, self.spec.cls)
        return url

    def wait_for_ready(
        self, base_url: str | None = None, timeout_s: float | None = None
    ) -> str:
        """OpenEnv's own readiness wait (`/health`, and the server process's
        liveness where the provider checks it); returns the server's base URL."""
        url = base_url or self._url
        if self.provider is None or url is None:
            raise EnvFailure(f"the {self.spec.cls} launch was not started, or stopped")
        timeout_s = self.launch_timeout_s if timeout_s is None else timeout_s
        try:
            self.provider.wait_for_ready(url, timeout_s=timeout_s)
        except Exception as e:
            raise EnvFailure(
                self._redacted(f"{self.spec.cls}: {describe(e)}")
            ) from None
        return url

    def running(self) -> bool:
        """Whether the sandbox was started and not stopped (never asks the cloud:
        `ServerPool` asks under its lock; a dead server is found by its clients)."""
        return self._url is not None and not self._stopped

    def stop(self, grace_s: float = 2.0) -> None:
        """Tear the sandbox down (`stop_container()`, then `close()`); a start under
        way tears its own down when it returns."""
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
                    self._redacted(describe(e)),
                )

    def log_tail(self, chars: int = 0) -> str:
        """Sandboxes' output stays in the cloud (the providers withhold it)."""
        return ""

    def _redacted(self, text: str) -> str:
        return redact(text, self._secret_env.values())


def cloud_launch_plan(target: EnvTarget) -> LaunchPlan:
    """The launch of a `CloudLaunch` for `target` (`target.launcher` one of
    `CLOUD_PROVIDERS`; no start arguments: they are its own). Raises `EnvFailure`
    for a bad option, before anything is created."""
    assert target.env is not None
    spec = cloud_provider(target)
    kwargs = dict(target.provider_kwargs)
    # Dropped here rather than by `read_options(ignore=...)`, which would apply the
    # env folder's manifest (Docker's limits, not a sandbox's) for `project_path`.
    ignored = sorted(_LOCAL_ONLY & kwargs.keys())
    if ignored:
        logger.warning(
            "provider %s ignores %s %s (a sandbox runs its image's server)",
            spec.name,
            setting("provider_kwargs"),
            ", ".join(ignored),
        )
    for key in ignored:
        kwargs.pop(key)
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
    options = _read_options(spec, provider_class(spec), kwargs)
    del options["image"]
    start_args = {k: options.pop(k) for k in _START_KEYS if k in options}
    if spec.name == "hf_sandbox":
        options["image"] = image  # its constructor requires it
    return LaunchPlan(
        CloudLaunch(
            spec=spec,
            env=target.env,
            image=image,
            options=options,
            start_args=start_args,
            secret_env=target.secret_env,
            launch_timeout_s=target.launch_timeout_s,
        )
    )
