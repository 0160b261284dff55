"""OpenEnv's cloud providers at their boundary: the real provider classes of openenv
0.10 run unchanged, with only their SDK replaced by a recording stand-in whose
signatures are the real ones; each stand-in sandbox runs a real local Wordle server,
so a rollout really runs through the provider. Asserted: the exact constructor
arguments and SDK calls a rollout makes, teardown on success, error and cancellation,
the install hints of missing SDKs, and credentials only by variable name.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
import sys
import time
from typing import Any

import pytest

from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
from openenv_v1.core import EnvFailure, EnvTarget
from openenv_v1.core.launch.cloud import (
    CLOUD_PROVIDERS,
    cloud_launch_plan,
    preflight,
    provider_class,
)
from openenv_v1.core.launch.plan import check_launcher
from openenv_v1.core.setting_names import render_settings
from openenv_v1.vf04.flags import VF_EVAL_FLAGS
from tests import zygote
from tests.cloud import (
    SECRET_NAME,
    STANDINS,
    daytona_target,
    play_one_step,
    standin_servers,
)
from tests.servers import (
    eval_environ,
    policy_server,
    read_traces,
    run_cli,
    wordle_uv_eval_command,
)

# --- which providers exist, and what a missing SDK says -----------------------------


def test_the_five_classes_are_openenv_010s_with_the_launcher_face():
    for spec in CLOUD_PROVIDERS.values():
        cls = provider_class(spec)
        assert cls.__name__ == spec.cls
        # The options declared are the constructor's own.
        init = inspect.signature(cls.__init__).parameters
        assert set(spec.options.split()) <= set(init) - {"self", *spec.credentials}
        start = inspect.signature(cls.start_container).parameters
        assert list(start)[:4] == ["self", "image", "port", "env_vars"]
        assert callable(cls.stop_container) and callable(cls.wait_for_ready)
        wait = inspect.signature(cls.wait_for_ready).parameters
        assert {"base_url", "timeout_s"} <= set(wait)


@pytest.mark.parametrize(
    ("name", "install"),
    [
        ("daytona", "pip install 'daytona>=0.136' pyyaml"),
        ("modal", "pip install 'modal>=1.4' pyyaml"),
        ("aca", "pip install 'azure-containerapps-sandbox>=0.1.0b2,<0.2'"),
        ("novita", "pip install 'novita-sandbox>=2.1.1'"),
    ],
)
def test_a_provider_without_its_sdk_fails_before_any_rollout(name, install):
    target = EnvTarget(env="org/env", provider=name, provider_kwargs={"image": "x"})
    with pytest.raises(EnvFailure) as info:
        preflight(target)
    assert install in str(info.value)
    assert CLOUD_PROVIDERS[name].variables[0] in str(info.value)
    # The taskset fails as it is built, and so does every launch.
    with pytest.raises(ValueError, match=re_escape(install)):
        OpenEnvTaskset(OpenEnvConfig(env="org/env", provider=name))
    with pytest.raises(EnvFailure, match=re_escape(install)):
        check_launcher(target)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_hf_sandbox_needs_no_more_than_the_installed_huggingface_hub():
    preflight(EnvTarget(env="org/env", provider="hf_sandbox"))


def test_check_names_the_package_to_install_and_launches_nothing():
    started = time.monotonic()
    proc = run_cli(
        *("check", "org/env", "--provider", "modal"),
        *("--provider-kwargs", '{"image": "ghcr.io/org/env:1"}', "--json"),
        timeout=120,
    )
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and not report["ok"]
    assert report["target"]["provider"] == "modal"
    assert "cannot launch org/env with Modal" in report["failure"]["error"]
    assert "pip install 'modal>=1.4' pyyaml" in report["failure"]["error"]
    assert time.monotonic() - started < 60


def test_credentials_are_refused_as_options_naming_their_variable(standins):
    value = f"dtn-{secrets.token_hex(6)}"
    target = EnvTarget(
        env="org/env",
        provider="daytona",
        provider_kwargs={"image": "img", "api_key": value},
    )
    with pytest.raises(EnvFailure) as info:
        cloud_launch_plan(target)
    assert "set DAYTONA_API_KEY" in str(info.value) and value not in str(info.value)
    assert render_settings(str(info.value), VF_EVAL_FLAGS).startswith(
        "`--env.taskset.provider-kwargs.api-key` would put a credential in the config"
    )
    aca = EnvTarget(env="o/e", provider="aca", provider_kwargs={"image": "disk:x"})
    with pytest.raises(
        EnvFailure, match="bad ACASandboxProvider option in `provider_kwargs`: zone: "
    ):
        cloud_launch_plan(
            EnvTarget(
                env="o/e",
                provider="aca",
                provider_kwargs={**aca.provider_kwargs, "zone": "a"},
            )
        )
    with pytest.raises(EnvFailure, match="needs `provider_kwargs.image`"):
        cloud_launch_plan(EnvTarget(env="o/e", provider="modal"))


# --- Daytona: the real DaytonaProvider, the `daytona` SDK stood in for --------------


def test_daytona_rollout_makes_exactly_these_calls_and_deletes_its_sandbox(
    standins, monkeypatch
):
    monkeypatch.setenv("DAYTONA_API_KEY", "dtn-key")
    secret = f"sk-{secrets.token_hex(8)}"
    target = daytona_target(secret, auto_stop_interval=5, create_timeout=90)
    first, stepped = asyncio.run(play_one_step(target))
    assert first.done is False and stepped.observation is not None
    # Liveness probes come while the server starts: as many as that takes.
    calls = [
        c for c in standins.CALLS if c[0] != "exec" or not c[1].startswith("kill -0")
    ]
    (sandbox,) = standins.SANDBOXES
    assert calls == [
        [
            "DaytonaConfig",
            {"api_key": "$DAYTONA_API_KEY", "api_url": None, "target": "us"},
        ],
        ["Daytona"],
        [
            "create",
            "CreateSandboxFromImageParams",
            {
                "image": "ghcr.io/org/wordle:1",
                "env_vars": [SECRET_NAME],
                "auto_stop_interval": 5,
            },
            90,
            {},
        ],
        ["exec", "test -f /app/env/openenv.yaml && echo found", 10],
        ["exec", "cat /app/env/openenv.yaml", 10],
        [
            "exec",
            "nohup bash -c 'cd /app/env && python -m uvicorn "
            "wordle_env.server.app:app --host 0.0.0.0 --port 8000' > "
            "/tmp/openenv-server.log 2>&1 & echo $! > /tmp/openenv-server.pid",
            10,
        ],
        ["create_signed_preview_url", 8000, 86400],
        ["delete", f"sandbox-{sandbox.port}"],
    ]
    # The forwarded value reached the sandbox's server, which is gone now.
    assert sandbox.env == {SECRET_NAME: secret} and sandbox.killed
    assert standin_servers() == []


def test_daytona_failure_after_create_deletes_the_sandbox_and_hides_the_secret(
    standins, monkeypatch
):
    secret = f"sk-{secrets.token_hex(8)}"
    monkeypatch.setattr(
        standins, "FAIL_EXEC", RuntimeError(f"exec refused (env had {secret})")
    )
    with pytest.raises(EnvFailure) as info:
        asyncio.run(play_one_step(daytona_target(secret)))
    message = str(info.value)
    assert message.startswith("cannot launch local/wordle with Daytona: ")
    assert "exec refused" in message and secret not in message
    assert "<redacted>" in message
    assert standins.CALLS[-1][0] == "delete"
    assert all(s.killed for s in standins.SANDBOXES)


def test_daytona_server_that_dies_fails_the_wait_and_deletes_the_sandbox(
    standins, monkeypatch
):
    monkeypatch.setenv("OPENENV_V1_STANDIN_APP", "no_such_module:app")
    with pytest.raises(EnvFailure) as info:
        asyncio.run(play_one_step(daytona_target(f"sk-{secrets.token_hex(8)}")))
    # DaytonaProvider's own liveness probe saw the server die.
    assert "with Daytona: DaytonaProvider: RuntimeError: Server process died" in str(
        info.value
    )
    (sandbox,) = standins.SANDBOXES
    assert standins.CALLS[-1] == ["delete", f"sandbox-{sandbox.port}"]
    assert sandbox.killed and standin_servers() == []


def test_daytona_cancelled_mid_create_deletes_the_sandbox_once_made(
    standins, monkeypatch
):
    import threading

    gate = threading.Event()
    monkeypatch.setattr(standins, "CREATE_GATE", gate)

    async def cancel_during_create() -> None:
        task = asyncio.create_task(play_one_step(daytona_target("sk-cancel")))
        while not any(c[0] == "create" for c in standins.CALLS):
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_during_create())
    assert not any(c[0] == "delete" for c in standins.CALLS)  # nothing made yet
    gate.set()  # the SDK now returns the sandbox the cancelled rollout asked for
    deadline = time.monotonic() + 30
    while not any(c[0] == "delete" for c in standins.CALLS):
        assert time.monotonic() < deadline, standins.CALLS
        time.sleep(0.1)
    (sandbox,) = standins.SANDBOXES
    assert sandbox.killed and standins.CALLS[-1] == [
        "delete",
        f"sandbox-{sandbox.port}",
    ]
    assert standin_servers() == []


# --- HF sandboxes: the real HFSandboxProvider and its local auth proxy --------------


def test_hf_sandbox_rollout_through_the_real_auth_proxy(monkeypatch, tmp_path):
    import huggingface_hub
    from openenv.core.containers.runtime import hf_sandbox_provider as hf

    monkeypatch.syspath_prepend(str(STANDINS))
    from local_sandbox import LocalSandbox

    calls: list[list[Any]] = []
    sandboxes: list[LocalSandbox] = []
    monkeypatch.setenv("HF_TOKEN", "hf-token-value")

    class RecordingSandbox:
        def __init__(self, env: dict[str, str] | None) -> None:
            self.local = LocalSandbox(env)
            sandboxes.append(self.local)

        def run(self, command: str, *, shell: bool = False, **kwargs: Any) -> None:
            calls.append(["run", command, shell, kwargs])
            self.local.serve()

        def proxy_url_for(self, port: int, path: str = "/") -> str:
            calls.append(["proxy_url_for", port, path])
            return f"{self.local.url}{path}"

        @property
        def proxy_headers(self) -> dict[str, str]:
            return {"Authorization": "Bearer hf-token-value"}

        def kill(self) -> None:
            calls.append(["kill"])
            self.local.kill()

    class RecordingPool(huggingface_hub.SandboxPool):
        """The real pool class; only its network calls are replaced."""

        def __init__(
            self,
            image: str = "python:3.12",
            *,
            flavor: str = "cpu-basic",
            sandboxes_per_host: int = 50,
            warm_up: int = 1,
            max_hosts: int | None = None,
            name: str | None = None,
            idle_timeout: int | float | str | None = 600,
            namespace: str | None = None,
            start_timeout: float = 120.0,
            adopt_hosts: str = "own",
            token: str | None = None,
            _connect_mode: bool = False,
        ) -> None:
            calls.append(["SandboxPool", image, flavor, name])

        def create(
            self,
            *,
            env: dict[str, Any] | None = None,
            idle_timeout: int | float | str | None = 600,
            forward_hf_token: bool = False,
        ) -> Any:
            calls.append(["create", sorted(env or {})])
            return RecordingSandbox(env)

    real = huggingface_hub.SandboxPool
    for method in ("__init__", "create"):
        assert shape(getattr(RecordingPool, method)) == shape(getattr(real, method))
    monkeypatch.setattr(hf, "_get_sandbox_pool_cls", lambda: RecordingPool)
    monkeypatch.setattr(hf, "_POOLS", {})
    secret = f"sk-{secrets.token_hex(8)}"
    target = EnvTarget(
        env="local/wordle",
        provider="hf_sandbox",
        provider_kwargs={
            "image": "hf.co/spaces/openenv/wordle",
            "flavor": "cpu-upgrade",
        },
        secret_env={SECRET_NAME: secret},
        launch_timeout_s=60,
    )
    first, stepped = asyncio.run(play_one_step(target))
    assert first.done is False and stepped.observation is not None
    assert calls == [
        [
            "SandboxPool",
            "hf.co/spaces/openenv/wordle",
            "cpu-upgrade",
            hf._pool_name("hf.co/spaces/openenv/wordle", "cpu-upgrade"),
        ],
        ["create", [SECRET_NAME]],
        ["run", hf._SERVER_COMMAND, True, {}],
        ["proxy_url_for", 8000, "/"],
        ["kill"],
    ]
    (sandbox,) = sandboxes
    assert sandbox.env == {SECRET_NAME: secret} and sandbox.killed


# --- Modal, ACA, Novita: the real providers, their SDK adapter stood in for ---------


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    sys.path.insert(0, str(STANDINS))
    try:
        from local_sandbox import self_signed_cert
    finally:
        sys.path.remove(str(STANDINS))
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def shape(fn: Any) -> list[tuple[str, Any, Any]]:
    """A signature as names, kinds and defaults (annotations are spelled
    differently, `Optional[str]` and `str | None`, for the same type)."""
    return [
        (p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()
    ]


def _same_signatures(stand_in: type, real: type) -> None:
    for name, member in vars(real).items():
        if callable(member) and (not name.startswith("_") or name == "__init__"):
            assert shape(getattr(stand_in, name)) == shape(member), name


@pytest.fixture
def trust_tls(monkeypatch, tls):
    """Clients in this process (requests, websockets) trust the test certificate."""
    monkeypatch.setenv("SSL_CERT_FILE", tls[0])
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", tls[0])
    monkeypatch.syspath_prepend(str(STANDINS))
    return tls


def test_modal_rollout_makes_exactly_these_adapter_calls(monkeypatch, trust_tls):
    from local_sandbox import LocalSandbox
    from openenv.core.containers.runtime import modal_provider as mp

    calls: list[list[Any]] = []
    made: list[LocalSandbox] = []

    class RecordingModalAdapter:
        def __init__(self, *, app_name: str, use_sandbox_v2: bool):
            calls.append(["adapter", app_name, use_sandbox_v2])

        def image_from_registry(self, tag: str) -> Any:
            calls.append(["image_from_registry", tag])
            return f"modal-image:{tag}"

        def image_from_dockerfile(self, dockerfile_path: str, context_dir: str) -> Any:
            raise AssertionError("not used with a registry image")

        def create_sandbox(
            self,
            *,
            image: Any,
            encrypted_ports: list[int],
            timeout: int,
            env: dict[str, str] | None,
            extra: dict[str, Any],
        ) -> Any:
            calls.append(
                [
                    "create_sandbox",
                    image,
                    encrypted_ports,
                    timeout,
                    sorted(env or {}),
                    extra,
                ]
            )
            made.append(LocalSandbox(env, tls=trust_tls))
            return made[-1]

        def exec(self, sandbox: Any, command: str, *, timeout: int = 10) -> str:
            if not command.startswith("kill -0"):
                calls.append(["exec", command])
            return sandbox.exec(command)

        def tunnel_url(self, sandbox: Any, port: int) -> str:
            calls.append(["tunnel_url", port])
            return sandbox.url

        def terminate(self, sandbox: Any) -> None:
            calls.append(["terminate"])
            sandbox.kill()

    _same_signatures(RecordingModalAdapter, mp._DefaultModalAdapter)
    monkeypatch.setattr(mp, "_DefaultModalAdapter", RecordingModalAdapter)
    secret = f"sk-{secrets.token_hex(8)}"
    target = EnvTarget(
        env="local/wordle",
        provider="modal",
        provider_kwargs={
            "image": "ghcr.io/org/wordle:1",
            "cmd": "python -m uvicorn wordle_env.server.app:app --port 8000",
            "app_name": "rl-evals",
            "timeout": 900,
            "cpu": 2.0,
            "memory": 4096,
        },
        secret_env={SECRET_NAME: secret},
        launch_timeout_s=60,
    )
    first, stepped = asyncio.run(play_one_step(target))
    assert first.done is False and stepped.observation is not None
    assert calls == [
        ["adapter", "rl-evals", False],
        ["image_from_registry", "ghcr.io/org/wordle:1"],
        [
            "create_sandbox",
            "modal-image:ghcr.io/org/wordle:1",
            [8000],
            900,
            [SECRET_NAME],
            {
                "cpu": (mp._DEFAULT_CPU_REQUEST, 2.0),
                "memory": (mp._DEFAULT_MEMORY_REQUEST, 4096),
            },
        ],
        [
            "exec",
            "nohup bash -c 'python -m uvicorn wordle_env.server.app:app --port 8000' "
            "> /tmp/openenv-server.log 2>&1 & echo $! > /tmp/openenv-server.pid",
        ],
        ["tunnel_url", 8000],
        ["terminate"],
    ]
    (sandbox,) = made
    assert sandbox.env == {SECRET_NAME: secret} and sandbox.killed


def test_aca_rollout_makes_exactly_these_adapter_calls(monkeypatch, trust_tls):
    from local_sandbox import LocalSandbox
    from openenv.core.containers.runtime import aca_provider as ap

    calls: list[list[Any]] = []
    made: list[LocalSandbox] = []
    for name, value in {
        "AZURE_SUBSCRIPTION_ID": "sub-1",
        "AZURE_RESOURCE_GROUP": "rg-1",
        "AZURE_SANDBOX_GROUP": "sg-1",
        "AZURE_REGION": "westus3",
    }.items():
        monkeypatch.setenv(name, value)

    class RecordingACAAdapter:
        def __init__(
            self,
            *,
            subscription_id: str,
            resource_group: str,
            sandbox_group: str,
            region: str | None,
            endpoint: str | None,
            credential: Any,
            sdk_kwargs: dict[str, Any],
        ):
            calls.append(
                [
                    "adapter",
                    subscription_id,
                    resource_group,
                    sandbox_group,
                    region,
                    endpoint,
                    credential,
                    sdk_kwargs,
                ]
            )

        def create_sandbox(
            self,
            *,
            disk: str | None,
            disk_id: str | None,
            env_vars: dict[str, str] | None,
            labels: dict[str, str] | None,
            egress_policy: Any,
            cpu: str,
            memory: str,
            disk_size: str | None,
            auto_suspend_seconds: int,
            auto_suspend_mode: str,
            create_timeout: int,
            polling_interval: int,
        ) -> Any:
            calls.append(
                [
                    "create_sandbox",
                    disk,
                    disk_id,
                    sorted(env_vars or {}),
                    labels,
                    egress_policy,
                    cpu,
                    memory,
                    disk_size,
                    auto_suspend_seconds,
                    auto_suspend_mode,
                    create_timeout,
                    polling_interval,
                ]
            )
            made.append(LocalSandbox(env_vars, tls=trust_tls))
            return made[-1]

        def add_port(self, sandbox: Any, *, port: int, anonymous: bool) -> str:
            calls.append(["add_port", port, anonymous])
            return sandbox.url

        def exec(
            self, sandbox: Any, command: str, *, working_directory: str | None = None
        ) -> Any:
            if not command.startswith("kill -0"):
                calls.append(["exec", command, working_directory])
            return sandbox.exec(command)

        def delete_sandbox(self, sandbox: Any) -> None:
            calls.append(["delete_sandbox"])
            sandbox.kill()

        def close(self) -> None:
            calls.append(["close"])

    _same_signatures(RecordingACAAdapter, ap._DefaultACASandboxAdapter)
    monkeypatch.setattr(ap, "_DefaultACASandboxAdapter", RecordingACAAdapter)
    secret = f"sk-{secrets.token_hex(8)}"
    target = EnvTarget(
        env="local/wordle",
        provider="aca",
        provider_kwargs={
            "image": "disk:wordle",
            "anonymous_port": True,
            "cmd": "python -m uvicorn wordle_env.server.app:app --port 8000",
            "cpu": "2000m",
            "labels": {"run": "eval-7"},
        },
        secret_env={SECRET_NAME: secret},
        launch_timeout_s=60,
    )
    with pytest.warns(UserWarning, match="unrestricted egress"):
        first, stepped = asyncio.run(play_one_step(target))
    assert first.done is False and stepped.observation is not None
    assert calls == [
        ["adapter", "sub-1", "rg-1", "sg-1", "westus3", None, None, {}],
        [
            "create_sandbox",
            "wordle",
            None,
            [SECRET_NAME],
            {"run": "eval-7"},
            None,
            "2000m",
            "2048Mi",
            None,
            ap._DEFAULT_AUTO_SUSPEND_SECONDS,
            "Memory",
            300,
            3,
        ],
        [
            "exec",
            "nohup bash -c 'python -m uvicorn wordle_env.server.app:app --port 8000' "
            "> /tmp/openenv-server.log 2>&1 & echo $! > /tmp/openenv-server.pid",
            None,
        ],
        ["add_port", 8000, True],
        ["delete_sandbox"],
        ["close"],
    ]
    (sandbox,) = made
    assert sandbox.env == {SECRET_NAME: secret} and sandbox.killed


def test_novita_failure_after_create_kills_the_sandbox(monkeypatch, trust_tls):
    from local_sandbox import LocalSandbox
    from openenv.core.containers.runtime import novita_provider as nv

    calls: list[list[Any]] = []
    made: list[LocalSandbox] = []
    monkeypatch.setenv("NOVITA_API_KEY", "nv-key")

    class RecordingNovitaAdapter:
        def __init__(self, *, api_key: str | None, domain: str | None):
            calls.append(["adapter", api_key, domain])

        def create_sandbox(
            self,
            *,
            image: str | None,
            template: str | None,
            env_vars: dict[str, str] | None,
            timeout: int,
            metadata: dict[str, str] | None,
            secure: bool | None,
        ) -> Any:
            calls.append(
                [
                    "create_sandbox",
                    image,
                    template,
                    sorted(env_vars or {}),
                    timeout,
                    metadata,
                    secure,
                ]
            )
            made.append(LocalSandbox(env_vars, tls=trust_tls))
            return made[-1]

        def exec(
            self,
            sandbox: Any,
            command: str,
            *,
            timeout: float = 10,
            background: bool = False,
            user: str | None = None,
        ) -> str:
            calls.append(["exec", command[:5], timeout, background, user])
            return ""

        def host(self, sandbox: Any, port: int) -> str:
            calls.append(["host", port])
            return f"127.0.0.1:{sandbox.port}"  # what NOVITA_DEBUG gives: refused

        def kill(self, sandbox: Any) -> None:
            calls.append(["kill"])
            sandbox.kill()

        def build_template(self, **kwargs: Any) -> Any:
            raise AssertionError("not used with a registry image")

    real = nv._DefaultNovitaAdapter
    for method in ("__init__", "create_sandbox", "exec", "host", "kill"):
        assert shape(getattr(RecordingNovitaAdapter, method)) == shape(
            getattr(real, method)
        ), method
    monkeypatch.setattr(nv, "_DefaultNovitaAdapter", RecordingNovitaAdapter)
    target = EnvTarget(
        env="local/wordle",
        provider="novita",
        provider_kwargs={
            "image": "ghcr.io/org/wordle:1",
            "cmd": "server",
            "timeout": 600,
        },
        secret_env={SECRET_NAME: "sk-novita"},
        launch_timeout_s=60,
    )
    with pytest.raises(EnvFailure) as info:
        asyncio.run(play_one_step(target))
    assert "cannot launch local/wordle with Novita: NovitaSandboxProvider" in str(
        info.value
    )
    assert "NOVITA_DEBUG" in str(info.value)
    assert calls == [
        ["adapter", None, None],
        [
            "create_sandbox",
            "ghcr.io/org/wordle:1",
            None,
            [SECRET_NAME],
            600,
            None,
            None,
        ],
        ["exec", "sh -c", 0, True, "root"],
        ["host", 8000],
        ["kill"],
    ]
    assert all(s.killed for s in made)


# --- an eval on verifiers 0.2: shared servers in Daytona sandboxes -------------------


def test_eval_on_daytona_sandboxes_keeps_every_secret_out_of_its_files(tmp_path):
    value = f"sk-test-{secrets.token_hex(8)}"
    api_key = f"dtn-{secrets.token_hex(8)}"
    record = tmp_path / "calls.jsonl"
    kwargs = json.dumps({"image": "ghcr.io/org/wordle:1"})
    with policy_server("solver") as policy:
        command = wordle_uv_eval_command(
            policy,
            '[{"seed": 1}, {"seed": 2}]',
            "--taskset.provider",
            "daytona",
            "--taskset.task.user.provider-kwargs",
            kwargs,
            "--taskset.task.user.forward-env",
            json.dumps([SECRET_NAME]),
        )
        proc = zygote.run(
            command,
            cwd=tmp_path,
            env=eval_environ(
                {
                    SECRET_NAME: value,
                    "DAYTONA_API_KEY": api_key,
                    "PYTHONPATH": str(STANDINS),
                    "OPENENV_V1_STANDIN_RECORD": str(record),
                }
            ),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = read_traces(tmp_path)
    assert len(traces) == 2
    assert [t["info"]["openenv"]["stop_reason"] for t in traces] == ["done"] * 2
    assert all(t["info"]["openenv"]["steps"] >= 1 for t in traces)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    names = [c[0] for c in calls if c[0] != "exec"]
    # One shared server (Wordle takes many sessions), made once, deleted at the end.
    assert names == [
        "DaytonaConfig",
        "Daytona",
        "create",
        "create_signed_preview_url",
        "delete",
    ], calls
    assert calls[0][1]["api_key"] == "$DAYTONA_API_KEY"
    assert calls[2][2]["env_vars"] == [SECRET_NAME]
    run_dir = next(tmp_path.glob("outputs/*/*/traces.jsonl")).parent
    for path in run_dir.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert value not in text and api_key not in text, path
    for stream in (proc.stdout, proc.stderr):
        assert value not in stream and api_key not in stream
    assert standin_servers() == []
