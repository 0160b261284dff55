"""verifiers 0.4: model code in an env server cannot reach the eval's secrets or its
own reward. The episode runs in the eval process; a real eval of the adversary's env
(`tests/envs/snoop_env`), run as an ordinary user (no capabilities)."""

import subprocess

from tests.isolation import (
    AS_ORDINARY_USER,
    PLANTED,
    SNOOP_COMMAND,
    assert_saw_only_what_it_was_given,
    planted_secret,
    read_reports,
    snoop_kwargs,
)
from tests.servers import eval_environ, policy_server
from tests.vf04.evals import read_episodes, traces_of, vf_eval_command


def test_env_server_sees_only_what_it_was_given_and_keeps_the_games_reward(tmp_path):
    planted = planted_secret()
    reports = tmp_path / "reports"
    reports.mkdir()
    with policy_server("script", script=[SNOOP_COMMAND]) as policy:
        proc = subprocess.run(
            [
                *AS_ORDINARY_USER,
                *vf_eval_command(
                    [
                        "openenv-v1",
                        "--env.taskset.env",
                        "local/snoop",
                        "--env.taskset.provider-kwargs",
                        snoop_kwargs(reports),
                        "--env.taskset.resets",
                        "[{}, {}]",
                        "-m",
                        "local-policy",
                        "--client.base-url",
                        policy,
                        "--client.api-key-var",
                        "LOCAL_POLICY_KEY",
                        "--no-rich",
                    ]
                ),
            ],
            cwd=tmp_path,
            env=eval_environ({PLANTED: planted}),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    traces = traces_of(read_episodes(tmp_path))
    assert len(traces) == 2
    assert [t["rewards"]["openenv_reward"]["score"] for t in traces] == [1.0, 1.0]
    found = read_reports(reports)
    assert len(found) == 2
    for report in found:
        assert_saw_only_what_it_was_given(report, planted)
