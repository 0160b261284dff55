"""The `provider` setting: its values on both lines and in `check`, how it agrees with
`use_docker` and `base_url`, and the launcher each value dispatches to."""

import contextlib
import sys
import types
from typing import get_args

import pytest
import verifiers.v1 as vf
from pydantic import ValidationError

from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
from openenv_v1.cli import build_parser
from openenv_v1.core import EnvFailure, EnvTarget
from openenv_v1.core.launch.docker.container import DockerLaunch
from openenv_v1.core.launch.docker.options import DockerOptions
from openenv_v1.core.launch.plan import (
    PLACES,
    Launcher,
    LaunchPlan,
    Place,
    ProviderName,
    check_launcher,
    launch_failure,
    launch_plan,
)
from openenv_v1.core.launch.uv import SupervisedUVProvider
from tests.servers import WORDLE_PROJECT


def test_the_cli_choices_are_the_setting_values():
    (commands,) = [a for a in build_parser()._actions if a.dest == "command"]
    (provider,) = [
        a
        for a in commands.choices["check"]._actions
        if "--provider" in a.option_strings
    ]
    assert tuple(provider.choices) == get_args(ProviderName) == tuple(PLACES)
    args = build_parser().parse_args(["check", "org/env", "--provider", "modal"])
    assert args.provider == "modal"


def test_check_refuses_an_unknown_provider(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["check", "org/env", "--provider", "k8s"])
    assert info.value.code == 2
    assert "invalid choice: 'k8s'" in capsys.readouterr().err


def test_launcher_defaults_to_uv_or_docker_and_provider_wins():
    assert EnvTarget(env="o/e").launcher == "uv"
    assert EnvTarget(env="o/e", use_docker=True).launcher == "docker"
    assert EnvTarget(env="o/e", provider="modal").launcher == "modal"


def test_launch_plan_dispatches_uv_and_docker_to_their_modules():
    path = str(WORDLE_PROJECT)
    uv = launch_plan(EnvTarget(env="o/e", provider_kwargs={"project_path": path}))
    assert isinstance(uv.launcher, SupervisedUVProvider)
    explicit = launch_plan(
        EnvTarget(env="o/e", provider="uv", provider_kwargs={"project_path": path})
    )
    assert isinstance(explicit.launcher, SupervisedUVProvider)
    docker = launch_plan(EnvTarget(env="o/e", provider="docker"))
    assert isinstance(docker.launcher, DockerLaunch)
    for plan in (uv, explicit, docker):
        assert isinstance(plan.launcher, Launcher)  # the seam's members, all there
        assert plan.servers_at_start == 1


def test_a_uv_launch_reads_its_options_as_every_place_does():
    path = str(WORDLE_PROJECT)
    target = EnvTarget(
        env="o/e",
        launch_timeout_s=7.0,
        secret_env={"TOKEN": "t"},
        provider_kwargs={"project_path": path, "port": 9, "env_vars": {"A": "1"}},
    )
    plan = launch_plan(target)
    assert isinstance(plan.launcher, SupervisedUVProvider)
    assert plan.launcher.context_timeout_s == 7.0  # the target's, unless set
    assert plan.start_args == {
        "port": 9,
        "workers": 1,
        "env_vars": {"A": "1", "TOKEN": "t"},
    }
    typo = EnvTarget(env="o/e", provider_kwargs={"project_path": path, "memroy": 1})
    with pytest.raises(EnvFailure) as info:
        launch_plan(typo)
    message = str(info.value)
    assert message.startswith("bad UV option in ")
    assert "`provider_kwargs`: memroy: Extra inputs are not permitted" in message
    assert "(known: project_path, app, host, port, workers, env_vars" in message


def test_a_provider_whose_module_is_missing_fails_naming_it(monkeypatch):
    monkeypatch.setitem(
        PLACES, "swarm", Place("openenv_v1.core.no_such_launch", "plan", "Swarm")
    )
    target = EnvTarget(env="o/e", provider="swarm")
    with pytest.raises(EnvFailure, match="provider 'swarm' is not available.*no_such"):
        check_launcher(target)
    with pytest.raises(EnvFailure, match="provider 'swarm' is not available"):
        launch_plan(target)


def test_launch_plan_runs_the_modules_preflight_then_its_plan(monkeypatch):
    calls: list[tuple[str, str | None]] = []
    module = types.ModuleType("tests_fake_launch")
    launcher = DockerLaunch(env="o/e", options=DockerOptions())

    def preflight(target: EnvTarget) -> None:
        calls.append(("preflight", target.provider))
        if target.provider_kwargs.get("broken"):
            raise EnvFailure("install fake-sdk")

    def fake_launch_plan(target: EnvTarget):
        calls.append(("plan", target.provider))
        return LaunchPlan(launcher, {"port": 1})

    module.preflight = preflight  # type: ignore[attr-defined]
    module.fake_launch_plan = fake_launch_plan  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_fake_launch", module)
    monkeypatch.setitem(
        PLACES, "modal", Place("tests_fake_launch", "fake_launch_plan", "Modal")
    )
    assert launch_plan(EnvTarget(env="o/e", provider="modal")) == LaunchPlan(
        launcher, {"port": 1}
    )
    assert calls == [("preflight", "modal"), ("plan", "modal")]
    broken = EnvTarget(env="o/e", provider="modal", provider_kwargs={"broken": True})
    with pytest.raises(EnvFailure, match="install fake-sdk"):
        check_launcher(broken)
    check_launcher(EnvTarget(base_url="http://127.0.0.1:1", provider="modal"))


def test_launch_failure_names_the_provider():
    failure = launch_failure(EnvTarget(env="o/e", provider="aca"), ValueError("boom"))
    assert (
        str(failure) == "cannot launch o/e with Azure Container Apps: ValueError: boom"
    )
    uv = launch_failure(EnvTarget(env="o/e"), EnvFailure("exited"))
    assert str(uv) == "cannot launch o/e with the UV provider: exited"


def test_provider_docker_is_use_docker_on_verifiers_02():
    config = OpenEnvConfig(env="org/env", provider="docker")
    assert config.use_docker is True
    # The same placement as use_docker: a Prime VM of its own.
    assert isinstance(config.task.user.runtime, vf.PrimeConfig)


def test_provider_and_use_docker_or_base_url_disagree_on_verifiers_02():
    with pytest.raises(
        ValidationError,
        match="drop `--taskset.use-docker`, or set `--taskset.provider docker`",
    ):
        OpenEnvConfig(env="org/env", provider="modal", use_docker=True)
    with pytest.raises(
        ValidationError, match="drop `--taskset.provider`, or drop `--taskset.base-url`"
    ):
        OpenEnvConfig(base_url="http://127.0.0.1:1", provider="modal")
    with pytest.raises(ValidationError, match="provider"):
        OpenEnvConfig(env="org/env", provider="k8s")


def test_the_provider_reaches_every_task_and_shares_servers_like_uv(monkeypatch):
    # No preflight for this test: the launcher's own checks are tested with it.
    monkeypatch.setattr("openenv_v1.taskset_core.check_launcher", lambda target: None)
    config = OpenEnvConfig(
        env="org/env", provider="swarm", resets=[{}, {}], shared_servers=False
    )
    assert config.use_docker is False
    # The user simulator stays where it is for UV (no Prime VM as for Docker).
    assert config.task.user == OpenEnvConfig(env="org/env").task.user
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        tasks = list(taskset.load())
    assert [t.data.provider for t in tasks] == ["swarm", "swarm"]
    assert OpenEnvConfig(env="org/env", provider="swarm").shares_servers()
