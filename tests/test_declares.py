"""What an env declares, on verifiers 0.2: its own tasks (OpenEnv's Task API), its
`openenv.yaml`, the reward contract, and groups that share a start. Real servers:
`tests/envs/tasks_env` (splits train 300 / test 60, `reset(split, index)`), served
directly or UV-launched from a copy of its folder with an `openenv.yaml` of each kind.
"""

import contextlib
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from openenv_v1 import OpenEnvConfig, OpenEnvTaskset
from openenv_v1.core.episode.env_episode import EpisodeLimits, open_episode
from openenv_v1.core.launch.docker.options import DockerOptions, docker_options
from openenv_v1.core.launch.swarm.options import swarm_options
from openenv_v1.core.launch.target import EnvTarget
from openenv_v1.core.manifest import read_manifest
from openenv_v1.core.setting_names import render_settings
from openenv_v1.vf02.flags import EVAL_FLAGS
from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    recorded_requests,
    run_cli,
    run_eval,
    uvicorn_server,
)

# One pytest-xdist worker runs this file: its module-scoped env servers start once,
# not once in each worker that gets one of its tests (each start is ~5 s of CPU).
pytestmark = pytest.mark.xdist_group("declares")

TASKS_ENV = TEST_ENVS / "tasks_env"
WRONG = ['{"answer": -1}']
"""Always wrong: each step pays 0.5, two of them end the episode."""

MANIFEST = """\
spec_version: 1
name: tasks_env
app: server.app:app
validation:
  reward: {range: [0, 1], floor_margin: 0.1}
  resources: {cpu: 1.5, memory_mb: 768, disk_mb: 1024, episode_timeout_s: 300}
  network: {mode: no-network}
  execution: {requires_credentials: [TASKS_TOKEN]}
"""


@pytest.fixture(scope="module")
def tasks_url():
    with uvicorn_server("server.app:app", app_dir=TASKS_ENV) as url:
        yield url


def tasks_env_copy(tmp_path: Path, manifest: str | None) -> Path:
    """A copy of the tasks env's folder, its openenv.yaml replaced by `manifest`."""
    project = tmp_path / "tasks_env"
    shutil.copytree(
        TASKS_ENV,
        project,
        ignore=shutil.ignore_patterns(".venv", "__pycache__", "*.egg-info"),
    )
    if manifest is not None:
        (project / "openenv.yaml").write_text(manifest)
    return project


def opening(request: dict) -> str:
    """The first user turn of a chat request."""
    for message in request["messages"]:
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, list):
                content = "\n".join(p.get("text", "") for p in content)
            return content
    return ""


def test_env_tasks_run_without_resets_named_keyed_seeded_and_hidden_from_the_model(
    tasks_url, tmp_path
):
    """No `resets`: the env's test split, a shard of it (offset 10, 3 tasks), each
    task reset with split and index; every rollout of a task shares one seed; the
    task's spec (its answer) is in the trace, never in what the model is sent;
    `reward last` scores the last step, the step rewards kept beside it."""
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=WRONG, record=record) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.base-url",
                tasks_url,
                "--taskset.num-tasks",
                "3",
                "--taskset.task-offset",
                "10",
                "--taskset.task.user.reward",
                "last",
                "-r",
                "2",
                "-c",
                "6",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 6, proc.stderr[-3000:]
    by_name = defaultdict(list)
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        by_name[trace["task"]["data"]["name"]].append(trace)
    assert sorted(by_name) == ["test#10", "test#11", "test#12"]
    seeds = set()
    for name, group in by_name.items():
        index = int(name.split("#")[1])
        data = [t["task"]["data"] for t in group]
        assert all(d["reset"] == {"split": "test", "index": index} for d in data)
        assert all(d["env_task"]["answer"] == index + 1 + 1000 for d in data)
        assert len({d["seed"] for d in data}) == 1 and data[0]["seed"] is not None
        assert len({d["key"] for d in data}) == 1
        seeds.add(data[0]["seed"])
        for trace in group:
            account = trace["info"]["openenv"]
            assert account["step_rewards"] == [0.5, 0.5]
            assert account["reward_mode"] == "last"
            assert account["reward"] == 0.5  # the sum would be 1.0
            assert trace["rewards"]["openenv_reward"] == 0.5
            assert trace["metrics"]["openenv_unscored"] == 0.0
    assert len(seeds) == 3
    requests = recorded_requests(record)
    # The two rollouts of each task opened on the same state (the seed's nonce).
    nonces = defaultdict(set)
    for request in requests:
        text = opening(request)
        question = re.search(r"What is \d+ \+ \d+\?", text)
        nonce = re.search(r"nonce: (\d+)", text)
        assert question and nonce, text
        nonces[question.group()].add(nonce.group(1))
    assert len(nonces) == 3 and all(len(n) == 1 for n in nonces.values()), nonces
    # The spec's id and answer never reach the model (the answer as a number of its
    # own: the nonces are random 9-digit numbers, which may hold its digits).
    sent = "\n".join(json.dumps(r["messages"]) for r in requests)
    for index in (10, 11, 12):
        assert f"test-{index}" not in sent
        assert not re.search(rf"(?<!\d){index + 1 + 1000}(?!\d)", sent)


def test_manifest_budget_range_credentials_and_pooled_listing_take_effect(tmp_path):
    """A UV-launched env folder whose openenv.yaml declares a reward range, an episode
    budget and a credential: the env's train split is listed from the shared
    server pool (one launch), each task combined with each `resets` entry; rewards
    outside the range are flagged per episode and in the summary; an episode the env
    never rewarded is unscored (0.0 on verifiers 0.2, and said so)."""
    project = tasks_env_copy(tmp_path, MANIFEST)
    kwargs = json.dumps({"project_path": str(project), "app": "server.app:app"})
    with policy_server("script", script=WRONG) as policy:
        proc, traces = run_eval(
            [
                "openenv-v1",
                "--taskset.env",
                "local/tasks",
                "--taskset.task.user.provider-kwargs",
                kwargs,
                "--taskset.task.user.forward-env",
                '["TASKS_TOKEN"]',
                "--taskset.split",
                "train",
                "--taskset.num-tasks",
                "1",
                "--taskset.resets",
                '[{"scale": 5}, {"unscored": true}]',
                "-c",
                "2",
                *model_flags(policy),
            ],
            tmp_path,
            env={"TASKS_TOKEN": "not-a-secret"},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    by_name = {t["task"]["data"]["name"]: t for t in traces}
    assert sorted(by_name) == ["train#0.0", "train#0.1"], proc.stderr[-3000:]
    scaled, unscored = by_name["train#0.0"], by_name["train#0.1"]
    assert scaled["task"]["data"]["reset"] == {"scale": 5, "split": "train", "index": 0}
    assert scaled["info"]["openenv"]["step_rewards"] == [2.5, 2.5]
    assert scaled["info"]["openenv"]["rewards_outside_range"] == 2
    assert scaled["metrics"]["openenv_rewards_outside_range"] == 2.0
    assert scaled["rewards"]["openenv_reward"] == 5.0
    assert unscored["info"]["openenv"]["reward"] is None
    assert unscored["info"]["openenv"]["step_rewards"] == [None, None]
    assert unscored["metrics"]["openenv_unscored"] == 1.0
    assert unscored["rewards"]["openenv_reward"] == 0.0
    assert unscored["metrics"]["openenv_rewards_outside_range"] == 0.0
    assert "openenv_rewards_outside_range" in proc.stdout + proc.stderr


def test_declared_credentials_missing_from_forward_env_fail_naming_them(
    tmp_path, monkeypatch
):
    project = tasks_env_copy(tmp_path, MANIFEST)
    user = {"provider_kwargs": {"project_path": str(project)}}
    config = OpenEnvConfig(env="local/tasks", task={"user": user}, shared_servers=False)
    with pytest.raises(ValueError, match=r"credentials TASKS_TOKEN.*forward-env"):
        OpenEnvTaskset(config)
    monkeypatch.setenv("TASKS_TOKEN", "x")
    user["forward_env"] = ["TASKS_TOKEN"]
    config = OpenEnvConfig(env="local/tasks", task={"user": user}, shared_servers=False)
    # Declared and forwarded: it builds, with the manifest's budget and range.
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        settings = taskset._task_config.user
    assert settings.episode_timeout_s == 300.0
    assert settings.reward_range == (0.0, 1.0)
    user["episode_timeout_s"] = 20.0
    config = OpenEnvConfig(env="local/tasks", task={"user": user}, shared_servers=False)
    with contextlib.closing(OpenEnvTaskset(config)) as taskset:
        assert taskset._task_config.user.episode_timeout_s == 20.0


async def test_a_spent_episode_budget_ends_the_episode_naming_it(tasks_url):
    async with contextlib.AsyncExitStack() as stack:
        episode = await open_episode(
            EnvTarget(base_url=tasks_url), EpisodeLimits(episode_timeout_s=1e-9), stack
        )
        await episode.reset({"split": "test", "index": 0})
        turn = await episode.act('{"answer": 1001}')
    assert turn.failed and episode.report.steps == 0
    assert "episode budget" in episode.report.error
    assert "episode_timeout_s" in episode.report.error
    assert "(`--taskset.task.user.episode-timeout-s`) is spent" in render_settings(
        episode.report.error, EVAL_FLAGS
    )


def test_malformed_manifest_names_the_field(tmp_path):
    project = tasks_env_copy(
        tmp_path, "name: x\nvalidation:\n  resources: {cpu: many}\n"
    )
    with pytest.raises(ValueError, match=r"validation\.resources\.cpu"):
        read_manifest(project)
    # No validation block: nothing declared (OpenEnv's own env folders).
    assert read_manifest(tasks_env_copy(tmp_path / "plain", None)) is None


def test_manifest_resources_are_default_container_limits_the_user_overrides(tmp_path):
    project = str(tasks_env_copy(tmp_path, MANIFEST))
    target = EnvTarget(
        env="local/tasks", use_docker=True, provider_kwargs={"project_path": project}
    )
    options = docker_options(target)
    assert (options.cpus, options.memory) == (1.5, "768m")
    mine = EnvTarget(
        env="local/tasks",
        use_docker=True,
        provider_kwargs={"project_path": project, "memory": "2g"},
    )
    assert docker_options(mine).memory == "2g"
    swarm = EnvTarget(
        env="local/tasks", provider="swarm", provider_kwargs={"project_path": project}
    )
    assert swarm_options(swarm).cpus == 1.5
    assert DockerOptions().cpus is None  # without a manifest: today's defaults


def test_check_shows_manifest_task_api_splits_and_seed_honour(tmp_path):
    """`openenv-v1 check` of an env folder: what its openenv.yaml declares, the
    Task API's splits and counts, the split a taskset without resets runs, and that
    the env honours seeds."""
    project = tasks_env_copy(tmp_path, MANIFEST)
    proc = run_cli(
        "check",
        "--project-path",
        str(project),
        "--app",
        "server.app:app",
        "--probe-sessions",
        "0",
        "--json",
        timeout=300,
        cwd=tmp_path,
    )
    report = json.loads(proc.stdout)
    assert report["ok"], report["failure"]
    assert report["manifest"]["reward_range"] == [0.0, 1.0]
    assert report["manifest"]["resources"]["episode_timeout_s"] == 300.0
    assert report["manifest"]["network"] == "no-network"
    assert report["manifest"]["requires_credentials"] == ["TASKS_TOKEN"]
    tasks = report["tasks"]
    assert tasks["offered"] and tasks["split"] == "test"
    assert {s["name"]: s["num_tasks"] for s in tasks["splits"]} == {
        "train": 300,
        "test": 60,
    }
    assert report["seed_check"]["status"] == "honoured"


def test_check_of_an_env_without_task_api_says_the_taskset_runs_its_resets(
    counter_url, wordle_url
):
    def check(url: str) -> dict:
        proc = run_cli(
            "check", "--base-url", url, "--probe-sessions", "0", "--json", timeout=120
        )
        return json.loads(proc.stdout)

    counter = check(counter_url)["tasks"]
    assert counter == {"offered": False, "splits": [], "taskset_uses": "default reset"}
    # The offline demo's env serves a small Task API.
    wordle = check(wordle_url)["tasks"]
    assert {s["name"]: s["num_tasks"] for s in wordle["splits"]} == {
        "train": 200,
        "test": 20,
    }


async def test_a_docker_launch_of_an_env_folder_takes_its_declared_limits(
    real_docker, tmp_path
):
    """The container of a Docker launch from a folder whose openenv.yaml declares
    resources runs with those cpus and memory (on the engine)."""
    from openenv_v1.core import open_env
    from openenv_v1.core.launch.docker.reaper import OWNER_LABEL, owner_token
    from tests.real_docker import CODE_ENV, docker_json, labelled, remove_labelled

    project = tmp_path / "code_env"
    shutil.copytree(CODE_ENV, project)
    manifest = project / "openenv.yaml"
    manifest.write_text(
        manifest.read_text()
        + "validation:\n  resources: {cpu: 0.5, memory_mb: 300, disk_mb: 100,"
        " episode_timeout_s: 60}\n"
    )
    mine = f"{OWNER_LABEL}={owner_token()}"
    target = EnvTarget(
        env="test/code_env",
        use_docker=True,
        provider_kwargs={"project_path": str(project)},
        launch_timeout_s=180,
    )
    try:
        async with contextlib.AsyncExitStack() as stack:
            client = await open_env(target, stack)
            (container,) = labelled(mine)
            (info,) = docker_json("inspect", container)
            await client.reset()
    finally:
        remove_labelled(mine)
    host = info["HostConfig"]
    assert host["NanoCpus"] == 500_000_000
    assert host["Memory"] == 300 * 1024**2
