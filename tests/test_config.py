"""Configuration rules: what is required, what wins, what is forced, and the errors."""

import contextlib
import os

import pytest
import verifiers.v1 as vf
from pydantic import ValidationError

from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
from openenv_wordle_v1 import WORDLE_APP, OpenEnvWordleConfig, OpenEnvWordleTaskset
from tests import zygote
from tests.servers import BIN


def test_config_can_be_built_from_the_id_alone_as_the_cli_does():
    # verifiers' CLI builds `Config(id=...)` before it reads any flag.
    assert OpenEnvConfig(id="openenv-v1").env is None


def test_taskset_without_env_or_base_url_names_the_flags():
    with pytest.raises(ValueError, match=r"`--taskset\.env` .*`--taskset\.base-url`"):
        OpenEnvTaskset(OpenEnvConfig(id="openenv-v1"))


def test_tasks_one_per_reset_named_by_source_with_no_prompt():
    config = OpenEnvConfig(
        env="org/env", resets=[{"seed": 1}, {"seed": 2}, {}], shared_servers=False
    )
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        tasks = list(taskset.load())
    assert [t.data.name for t in tasks] == ["org/env#0", "org/env#1", "org/env#2"]
    assert [t.data.reset for t in tasks] == [{"seed": 1}, {"seed": 2}, {}]
    assert all(t.data.prompt is None for t in tasks)
    assert [t.data.idx for t in tasks] == [0, 1, 2]


def test_default_is_one_empty_reset():
    config = OpenEnvConfig(env="org/env", shared_servers=False)
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        tasks = list(taskset.load())
    assert len(tasks) == 1 and tasks[0].data.reset == {}


def test_empty_resets_rejected():
    with pytest.raises(ValidationError, match="resets is empty"):
        OpenEnvConfig(env="org/env", resets=[])


def test_base_url_wins_over_inherited_env_and_provider_settings():
    config = OpenEnvWordleConfig(base_url="http://127.0.0.1:9999")
    with contextlib.closing(OpenEnvWordleTaskset(config)) as taskset:
        (task, *_) = taskset.load()
    assert task.data.base_url == "http://127.0.0.1:9999"
    assert task.data.env is None and task.data.use_docker is False
    assert task.data.name == "http://127.0.0.1:9999#0"


def test_use_docker_forces_a_prime_vm_and_no_colocation():
    config = OpenEnvConfig(env="org/env", use_docker=True)
    assert config.task.user.colocated is False
    assert isinstance(config.task.user.runtime, vf.PrimeConfig)
    assert config.task.user.runtime.vm is True


def test_use_docker_keeps_other_prime_settings():
    config = OpenEnvConfig(
        env="org/env",
        use_docker=True,
        task={
            "user": {
                "colocated": True,
                "runtime": {
                    "type": "prime",
                    "image": "my/image:1",
                    "region": "eu",
                    "labels": ["a"],
                    "cpu": 4.0,
                    "network_access": False,
                },
            }
        },
    )
    runtime = config.task.user.runtime
    assert (runtime.vm, runtime.image, runtime.region) == (True, "my/image:1", "eu")
    assert (runtime.labels, runtime.cpu, runtime.network_access) == (["a"], 4.0, False)
    assert config.task.user.colocated is False


def test_use_docker_replaces_a_non_prime_runtime():
    config = OpenEnvConfig(
        env="org/env", use_docker=True, task={"user": {"runtime": {"type": "docker"}}}
    )
    assert isinstance(config.task.user.runtime, vf.PrimeConfig)
    assert config.task.user.runtime.vm is True


def test_use_docker_with_base_url_rejected_naming_the_flags():
    with pytest.raises(ValidationError, match="--taskset.use-docker"):
        OpenEnvConfig(base_url="http://127.0.0.1:1", use_docker=True)


def test_relative_project_path_is_resolved_where_it_was_written(tmp_path):
    config = OpenEnvConfig(
        env="org/env", task={"user": {"provider_kwargs": {"project_path": "envs/x"}}}
    )
    expected = os.path.abspath("envs/x")
    assert config.task.user.provider_kwargs["project_path"] == expected
    git = "git+https://example.invalid/repo"
    config = OpenEnvConfig(
        env="org/env", task={"user": {"provider_kwargs": {"project_path": git}}}
    )
    assert config.task.user.provider_kwargs["project_path"] == git


def test_wordle_pins_env_and_defaults_its_app():
    config = OpenEnvWordleConfig(id="openenv-wordle-v1")
    assert config.env == "openenv/wordle"
    assert config.task.user.provider_kwargs["app"] == WORDLE_APP


def test_wordle_keeps_an_app_the_user_set():
    config = OpenEnvWordleConfig(
        task={"user": {"provider_kwargs": {"app": "mine.server:app"}}}
    )
    assert config.task.user.provider_kwargs["app"] == "mine.server:app"


def test_both_ids_resolve_to_their_configs():
    assert vf.taskset_config_type("openenv-v1") is OpenEnvConfig
    assert vf.taskset_config_type("openenv-wordle-v1") is OpenEnvWordleConfig


@pytest.mark.parametrize("taskset", ["openenv-v1", "openenv-wordle-v1"])
def test_eval_help_works_for_both_tasksets(taskset, tmp_path):
    proc = zygote.run(
        [str(BIN / "eval"), taskset, "--help"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "--taskset.base-url" in proc.stdout
    assert "--taskset.task.user.provider-kwargs" in proc.stdout


def test_servers_are_shared_only_for_uv_launches_with_a_local_user():
    assert OpenEnvConfig(env="org/env").shares_servers()
    assert not OpenEnvConfig(env="org/env", shared_servers=False).shares_servers()
    assert not OpenEnvConfig(env="org/env", use_docker=True).shares_servers()
    assert not OpenEnvConfig(base_url="http://127.0.0.1:1").shares_servers()
    colocated = OpenEnvConfig(env="org/env", task={"user": {"colocated": True}})
    assert not colocated.shares_servers()
    remote = OpenEnvConfig(env="org/env", task={"user": {"runtime": {"type": "prime"}}})
    assert not remote.shares_servers()


def test_base_url_taskset_starts_no_pool():
    config = OpenEnvWordleConfig(base_url="http://127.0.0.1:9999")
    with contextlib.closing(OpenEnvWordleTaskset(config)) as taskset:
        assert taskset.pool is None


def test_forward_env_names_a_missing_variable(monkeypatch):
    monkeypatch.delenv("OPENENV_V1_MISSING_TOKEN", raising=False)
    config = OpenEnvConfig(
        env="org/env",
        shared_servers=False,
        task={"user": {"forward_env": ["OPENENV_V1_MISSING_TOKEN"]}},
    )
    with pytest.raises(ValueError, match="OPENENV_V1_MISSING_TOKEN, not set"):
        OpenEnvTaskset(config)


def test_forwarded_values_reach_only_the_rollouts_config(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-value-never-saved")
    config = OpenEnvConfig(
        env="org/env",
        shared_servers=False,
        task={"user": {"forward_env": ["MY_SERVICE_API_KEY"]}},
    )
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        (task,) = taskset.load()
    user = task.user_server().config
    assert user.secret_env == {"MY_SERVICE_API_KEY": "sk-value-never-saved"}
    assert "sk-value-never-saved" not in repr(user)
    # What verifiers saves is the eval's own config, which holds the name only.
    assert config.task.user.secret_env == {}
    assert "sk-value-never-saved" not in config.model_dump_json()
