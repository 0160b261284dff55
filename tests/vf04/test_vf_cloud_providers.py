"""verifiers 0.4 (openenv-core 0.3.0): of OpenEnv's cloud providers only Daytona's
exists here. The others fail as the taskset is built, naming why; Daytona's older
class (no `image` in its constructor) runs a rollout and a `vf-eval` through the
recording `daytona` stand-in, whose sandboxes serve the local Wordle env."""

import asyncio
import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from openenv_v1.core import EnvFailure, EnvTarget
from openenv_v1.core.launch.cloud import preflight
from openenv_v1.vf04 import OpenEnvConfig, OpenEnvTaskset
from tests import zygote
from tests.cloud import (
    SECRET_NAME,
    STANDINS,
    daytona_target,
    play_one_step,
    standin_servers,
)
from tests.servers import WORDLE_PROJECT, eval_environ, policy_server
from tests.vf04.evals import read_episodes, traces_of, vf_eval_command


@pytest.fixture(scope="module")
def wordle_python(tmp_path_factory) -> str:
    """An interpreter with the local Wordle env (its server needs openenv 0.10,
    which this environment cannot hold): what the stand-in sandboxes run."""
    venv = tmp_path_factory.mktemp("wordle-venv")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    sync = ["uv", "sync", "--project", str(WORDLE_PROJECT), "--locked", "--quiet"]
    subprocess.run(sync, env=env, check=True, timeout=300)
    return str(venv / "bin" / "python")


@pytest.mark.parametrize("name", ["modal", "aca", "hf_sandbox", "novita"])
def test_providers_openenv_core_030_lacks_fail_as_the_taskset_is_built(name):
    target = EnvTarget(env="org/env", provider=name, provider_kwargs={"image": "x"})
    with pytest.raises(EnvFailure) as info:
        preflight(target)
    assert "openenv-core 0.3.0 does not have" in str(info.value)
    assert "openenv 0.10" in str(info.value)
    with pytest.raises(ValueError, match="openenv-core 0.3.0 does not have"):
        OpenEnvTaskset(OpenEnvConfig(env="org/env", provider=name))


def test_daytona_on_openenv_core_030_makes_the_same_calls(
    standins, monkeypatch, wordle_python
):
    monkeypatch.setenv("OPENENV_V1_STANDIN_PYTHON", wordle_python)
    monkeypatch.setenv("DAYTONA_API_KEY", "dtn-key")
    secret = f"sk-{secrets.token_hex(8)}"
    first, stepped = asyncio.run(play_one_step(daytona_target(secret)))
    assert first.done is False and stepped.observation is not None
    names = [c[0] for c in standins.CALLS if c[0] != "exec"]
    assert names == [
        "DaytonaConfig",
        "Daytona",
        "create",
        "create_signed_preview_url",
        "delete",
    ]
    create = next(c for c in standins.CALLS if c[0] == "create")
    assert create[1:] == [
        "CreateSandboxFromImageParams",
        {"image": "ghcr.io/org/wordle:1", "env_vars": [SECRET_NAME]},
        300,
        {},
    ]
    (sandbox,) = standins.SANDBOXES
    assert sandbox.env == {SECRET_NAME: secret} and sandbox.killed
    assert standin_servers() == []


@pytest.mark.long
def test_vf_eval_on_daytona_sandboxes_keeps_every_secret_out_of_its_files(
    tmp_path, wordle_python
):
    value = f"sk-test-{secrets.token_hex(8)}"
    api_key = f"dtn-{secrets.token_hex(8)}"
    record = tmp_path / "calls.jsonl"
    with policy_server("solver") as policy:
        proc = zygote.run(
            vf_eval_command(
                [
                    "openenv-v1",
                    "--env.taskset.env",
                    "local/wordle",
                    "--env.taskset.provider",
                    "daytona",
                    "--env.taskset.provider-kwargs",
                    json.dumps({"image": "ghcr.io/org/wordle:1"}),
                    "--env.taskset.resets",
                    '[{"seed": 1}, {"seed": 2}]',
                    "--env.taskset.forward-env",
                    json.dumps([SECRET_NAME]),
                    "-m",
                    "local-policy",
                    "--client.base-url",
                    policy,
                    "--client.api-key-var",
                    "LOCAL_POLICY_KEY",
                    "--no-rich",
                ]
            ),
            cwd=tmp_path,
            env=eval_environ(
                {
                    SECRET_NAME: value,
                    "DAYTONA_API_KEY": api_key,
                    "PYTHONPATH": str(STANDINS),
                    "OPENENV_V1_STANDIN_RECORD": str(record),
                    "OPENENV_V1_STANDIN_PYTHON": wordle_python,
                }
            ),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = traces_of(read_episodes(tmp_path))
    assert len(traces) == 2
    assert [t["info"]["openenv"]["stop_reason"] for t in traces] == ["done"] * 2
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert [c[0] for c in calls if c[0] != "exec"] == [
        "DaytonaConfig",
        "Daytona",
        "create",
        "create_signed_preview_url",
        "delete",
    ], calls
    assert calls[0][1]["api_key"] == "$DAYTONA_API_KEY"
    run_dir = next(tmp_path.glob("outputs/*/traces.jsonl")).parent
    for path in [*run_dir.rglob("*"), record]:
        if path.is_file():
            text = Path(path).read_text(errors="replace")
            assert value not in text and api_key not in text, path
    for stream in (proc.stdout, proc.stderr):
        assert value not in stream and api_key not in stream
    assert standin_servers() == []
