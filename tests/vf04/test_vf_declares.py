"""What an env declares, on verifiers 0.4: the env's own tasks (OpenEnv's Task API)
with no `resets`, keys that say what a task is (so `--resume` survives a reordered
and extended `resets` list), unscored episodes as None, shared seeds, and the prime-rl
config of docs/training.md run through `serve_env` / `EnvClient`.

The Task-API env (`tests/envs/tasks_env`) needs openenv 0.10, which verifiers 0.4's
environment cannot hold: it is served from an environment of the Wordle project's
own (openenv 0.10), with `--app-dir`."""

import asyncio
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import zygote
from tests.servers import (
    BIN,
    ROOT,
    TEST_ENVS,
    WORDLE_PROJECT,
    eval_environ,
    free_port,
    model_flags,
    policy_server,
    recorded_requests,
    serve_on_free_port,
    stop,
    without_gradio,
)
from tests.vf04.evals import read_episodes, run_vf_eval, traces_of

TASKS_ENV = TEST_ENVS / "tasks_env"
WRONG = ['{"answer": -1}']
"""Always wrong: each step pays 0.5, two of them end the episode."""


@pytest.fixture(scope="module")
def tasks_url(tmp_path_factory) -> Iterator[str]:
    venv = tmp_path_factory.mktemp("tasks-venv")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env["UV_PROJECT_ENVIRONMENT"] = str(venv)
    sync = ["uv", "sync", "--project", str(WORDLE_PROJECT), "--locked", "--quiet"]
    subprocess.run(sync, env=env, check=True, timeout=300)
    proc, port = serve_on_free_port(
        lambda port: [
            str(venv / "bin" / "python"),
            "-m",
            "uvicorn",
            "server.app:app",
            "--app-dir",
            str(TASKS_ENV),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        "/health",
        without_gradio(os.environ),
        timeout=120,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def openings(record: Path) -> dict[str, set[str]]:
    """The nonces each question opened with, over the recorded requests."""
    found = defaultdict(set)
    for request in recorded_requests(record):
        user = next(m for m in request["messages"] if m["role"] == "user")
        content = user["content"]
        if isinstance(content, list):
            content = "\n".join(p.get("text", "") for p in content)
        question = re.search(r"What is \d+ \+ \d+\?", content).group()
        found[question].add(re.search(r"nonce: (\d+)", content).group(1))
    return found


def test_env_tasks_without_resets_unscored_none_and_shared_seeds(tasks_url, tmp_path):
    """`split` with `resets` extras: each of 2 test tasks with each extra; the
    unscored extra records None (not 0.0); tasks are keyed by what they are; both
    rollouts of a task open on the same state."""
    record = tmp_path / "requests.jsonl"
    with policy_server("script", script=WRONG, record=record) as policy:
        proc, episodes = run_vf_eval(
            [
                "openenv-v1",
                "--env.taskset.base-url",
                tasks_url,
                "--env.taskset.split",
                "test",
                "--env.taskset.num-tasks",
                "2",
                "--env.taskset.resets",
                '[{}, {"unscored": true}]',
                "-r",
                "2",
                "-c",
                "8",
                *model_flags(policy),
            ],
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = traces_of(episodes)
    assert len(traces) == 8, proc.stderr[-3000:]
    by_name = defaultdict(list)
    for trace in traces:
        assert trace["errors"] == [], trace["errors"]
        by_name[trace["task"]["data"]["name"]].append(trace)
    assert sorted(by_name) == ["test#0.0", "test#0.1", "test#1.0", "test#1.1"]
    for name, group in by_name.items():
        data = group[0]["task"]["data"]
        index = int(name[5])
        assert data["reset"]["split"] == "test" and data["reset"]["index"] == index
        assert data["env_task"]["answer"] == index + 1 + 1000
        assert {t["task"]["key"] for t in group} == {data["key"]}
        for trace in group:
            assert trace["info"]["openenv"]["step_rewards"] in (
                [0.5, 0.5],
                [None, None],
            )
            if name.endswith(".1"):
                assert trace["rewards"]["openenv_reward"] is None
                assert trace["metrics"]["openenv_unscored"] == 1.0
                assert trace["info"]["openenv"]["reward"] is None
            else:
                assert trace["rewards"]["openenv_reward"]["score"] == 1.0
                assert trace["metrics"]["openenv_unscored"] == 0.0
    assert len({g[0]["task"]["key"] for g in by_name.values()}) == 4
    # 4 rollouts open each question (2 extras x 2 rollouts), on two seeds: one per
    # task, shared by its rollouts.
    nonces = openings(record)
    assert len(nonces) == 2 and all(len(n) == 2 for n in nonces.values()), nonces


def test_resume_after_reordering_and_extending_resets_runs_only_the_new_task(
    tasks_url, tmp_path
):
    """A run of resets A, B; its saved config edited to B, A, C and resumed: A and B
    are kept (their keys match), only C runs."""

    first = [{"tries": 1}, {"tries": 2}]
    record = tmp_path / "requests.jsonl"
    flags = ["--env.taskset.base-url", tasks_url]
    with policy_server("script", script=WRONG, record=record) as policy:
        proc, episodes = run_vf_eval(
            ["openenv-v1", *flags, "--env.taskset.resets", json.dumps(first)]
            + model_flags(policy),
            tmp_path,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(episodes) == 2
        asked = len(recorded_requests(record))
        assert asked == 1 + 2  # one try, then two
        kept = {e["id"] for e in episodes}
        (saved,) = tmp_path.glob("outputs/*/configs/**/eval.json")
        config = json.loads(saved.read_text())
        taskset = config["env"]["taskset"]
        assert taskset["resets"] == first
        taskset["resets"] = [{"tries": 2}, {"tries": 1}, {"tries": 3}]
        saved.write_text(json.dumps(config))
        proc = zygote.run(
            [str(BIN / "vf-eval"), "@", str(saved), "--resume", "--no-push"],
            cwd=tmp_path,
            env=eval_environ(),
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    episodes = read_episodes(tmp_path)
    assert len(episodes) == 3, proc.stderr[-3000:]
    assert kept <= {e["id"] for e in episodes}
    (new,) = [e for e in episodes if e["id"] not in kept]
    assert new["task"]["data"]["reset"] == {"tries": 3}
    assert new["ok"] and new["traces"][0]["errors"] == []
    # Only the new task asked the model: three tries, three requests.
    assert len(recorded_requests(record)) == asked + 3


def training_config() -> dict:
    """The prime-rl config of docs/training.md."""
    page = (ROOT / "docs" / "training.md").read_text()
    (block,) = re.findall(r"```toml\n(.*?)```", page, re.S)
    return tomllib.loads(block)


def test_training_doc_config_runs_through_the_env_server_prime_rl_uses(tasks_url):
    """Each source of the documented prime-rl config parses as prime-rl's env-server
    config does (`env` narrowed by the taskset id, `serve` a `ServeConfig`); the
    train source's env, pointed at a local Task-API server, serves its train split
    through `serve_env` and `EnvClient.run`."""
    import verifiers.v1 as vf
    from pydantic import BaseModel, SerializeAsAny, model_validator
    from verifiers.v1.serve import env_config_data

    from openenv_v1.vf04 import OpenEnvEnvConfig

    class EnvServerConfig(BaseModel):  # prime-rl's `env-server` config, its parts
        env: SerializeAsAny[vf.EnvConfig] = vf.SingleAgentEnvConfig()
        serve: vf.ServeConfig = vf.ServeConfig()

        @model_validator(mode="before")
        @classmethod
        def _resolve_env(cls, data):
            return vf.resolve_env_field(data, vf.narrowed_env_annotation(cls))

    orchestrator = training_config()["orchestrator"]
    sources = orchestrator["train"]["source"] + orchestrator["eval"]["source"]
    assert [s["env"]["taskset"]["split"] for s in sources] == ["train", "test"]
    for source in sources:
        parsed = EnvServerConfig(env=source["env"], serve=source.get("serve", {}))
        assert isinstance(parsed.env, OpenEnvEnvConfig)
        assert parsed.env.taskset.resets is None
    train = orchestrator["train"]["source"][0]
    serve = vf.ServeConfig(**train["serve"])
    kwargs = vf.pool_serve_kwargs(serve.pool)
    assert kwargs["max_workers"] * serve.max_concurrent == 512
    assert orchestrator["concurrency"]["max_inflight"] == 512
    taskset = {**train["env"]["taskset"], "num_tasks": 3}
    del taskset["env"]
    taskset["base_url"] = tasks_url
    parsed = EnvServerConfig(
        env={**train["env"], "taskset": taskset}, serve=train["serve"]
    )
    data = env_config_data(parsed.env)

    from tests.vf04.test_vf_serve import run_tasks, task_data

    address = f"tcp://127.0.0.1:{free_port()}"
    workers = str(kwargs["max_workers"])
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.vf04.env_server",
            address,
            json.dumps(data),
            workers,
        ],
        cwd=ROOT,
        env=eval_environ(),
        start_new_session=True,
    )
    try:
        with policy_server("script", script=WRONG) as policy:
            tasks = task_data(**{k: v for k, v in taskset.items() if k != "id"})
            episodes = asyncio.run(run_tasks(address, policy, tasks))
    finally:
        stop(server)
    names = sorted(e.traces[0].task.data.name for e in episodes)
    assert names == ["train#0", "train#1", "train#2"]
    for episode in episodes:
        (trace,) = episode.traces
        assert trace.errors == [], trace.errors
        assert trace.rewards["openenv_reward"].score == 1.0
