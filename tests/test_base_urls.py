"""A `base_url` list: one eval spread over several running servers, on verifiers 0.2
(`eval`, its user simulators leasing from the eval's desk over its endpoint), one of
them SIGKILLed costing no episode; and `check` of several `--base-url`s."""

import json
import os
import signal

import httpx
import pytest

from tests.servers import (
    TEST_ENVS,
    free_port,
    model_flags,
    policy_server,
    run_cli,
    run_eval,
    uvicorn_server,
)
from tests.test_eval import assert_all_done

RESETS = json.dumps([{"seed": seed} for seed in range(1, 7)])


def sessions_opened(url: str) -> int:
    """WebSocket sessions opened on a `counted_wordle` server so far."""
    return int(httpx.get(f"{url}/test/sessions", timeout=10).text)


def eval_over(urls: list[str], policy: str, cwd) -> tuple:
    cwd.mkdir()
    return run_eval(
        [
            "openenv-v1",
            "--taskset.base-url",
            json.dumps(urls),
            "--taskset.resets",
            RESETS,
            "-c",
            "3",
            *model_flags(policy),
        ],
        cwd,
    )


@pytest.mark.xdist_group("base_urls")
def test_an_eval_spreads_over_its_base_urls_and_loses_nothing_to_a_killed_one(
    tmp_path,
):
    app = "counted_wordle:app"
    with (
        uvicorn_server(app, app_dir=TEST_ENVS) as a,
        uvicorn_server(app, app_dir=TEST_ENVS) as b,
        uvicorn_server(app, app_dir=TEST_ENVS) as c,
        policy_server("solver") as policy,
    ):
        proc, traces = eval_over([a, b, c], policy, tmp_path / "spread")
        assert_all_done(proc, traces, 6)
        assert [t["rewards"]["openenv_reward"] for t in traces] == [1.0] * 6
        assert sorted(t["task"]["data"]["name"] for t in traces) == [
            f"{a}#{i}" for i in range(6)
        ]
        spread = [sessions_opened(url) for url in (a, b, c)]
        assert sum(spread) == 6 and min(spread) >= 1, spread
        # The first server SIGKILLed: its connections are refused from now on.
        pid = int(httpx.get(f"{a}/test/pid", timeout=10).text)
        os.kill(pid, signal.SIGKILL)
        proc, traces = eval_over([a, b, c], policy, tmp_path / "killed")
        assert_all_done(proc, traces, 6)
        assert sessions_opened(b) + sessions_opened(c) == sum(spread[1:]) + 6
        # A rollout was sent to it, found it gone, and took it out for the others.
        (log,) = (tmp_path / "killed").glob("outputs/*/*/eval.log")
        assert f"env server {a} could not be reached" in log.read_text()


def test_check_of_several_base_urls_reports_each_and_fails_if_one_does(wordle_url):
    down = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("check", "--base-url", wordle_url, "--base-url", down, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    first, second = (json.loads(line) for line in proc.stdout.splitlines())
    assert first["target"]["base_url"] == wordle_url and first["ok"]
    assert second["target"]["base_url"] == down and not second["ok"]
    proc = run_cli("check", "--base-url", wordle_url, "--base-url", wordle_url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("result      OK") == 2
    assert proc.stdout.count(f"{wordle_url} (a running server: connect only)") == 2


def test_base_url_takes_a_list_a_json_list_or_one_url_and_names_bad_lists():
    from openenv_v1.vf02.config import OpenEnvConfig

    urls = ["http://127.0.0.1:1", "http://127.0.0.1:2"]
    for given in (urls, json.dumps(urls), [f"{url}/" for url in urls]):
        config = OpenEnvConfig(base_url=given)
        assert config.base_urls() == tuple(urls) and config.leases_servers()
    single = OpenEnvConfig(base_url=urls[:1])
    assert single.base_url == urls[0] and not single.leases_servers()
    for bad, says in (("[", "not a JSON list"), ([], "no URL"), (urls * 2, "twice")):
        with pytest.raises(ValueError, match=rf"`--taskset\.base-url` .*{says}"):
            OpenEnvConfig(base_url=bad)
