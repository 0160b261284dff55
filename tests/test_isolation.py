"""Model code in an env server cannot reach the eval's secrets or its own reward
(verifiers 0.2): a real eval of the adversary's env (`tests/envs/snoop_env`), run as
an ordinary user (no capabilities), in both launch modes, with the package's own
harness. (verifiers' `null` harness puts the rollout's secret on its program's
command line, which every local process can read: docs/security.md.)"""

import subprocess

import pytest

from tests.isolation import (
    AS_ORDINARY_USER,
    PLANTED,
    SNOOP_COMMAND,
    assert_saw_only_what_it_was_given,
    planted_secret,
    read_reports,
    snoop_kwargs,
)
from tests.servers import (
    BIN,
    eval_environ,
    model_flags,
    policy_server,
    read_traces,
)


@pytest.mark.parametrize(
    ("shared", "tool_calls"),
    [(False, "text"), (True, "native")],
    ids=["per-rollout-text", "shared-native"],
)
def test_env_server_sees_only_what_it_was_given_and_keeps_the_games_reward(
    tmp_path, shared, tool_calls
):
    planted = planted_secret()
    reports = tmp_path / "reports"
    reports.mkdir()
    with policy_server("script", script=[SNOOP_COMMAND]) as policy:
        proc = subprocess.run(
            [
                *AS_ORDINARY_USER,
                str(BIN / "eval"),
                "openenv-v1",
                "--taskset.env",
                "local/snoop",
                "--taskset.task.user.provider-kwargs",
                snoop_kwargs(reports),
                "--taskset.resets",
                "[{}, {}]",
                "--taskset.shared-servers",
                str(shared).lower(),
                "--taskset.tool-calls",
                tool_calls,
                "--no-push",
                "--no-rich",
                *model_flags(policy),
            ],
            cwd=tmp_path,
            env=eval_environ({PLANTED: planted}),
            capture_output=True,
            text=True,
            timeout=300,
        )
    traces = read_traces(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2
    # The game pays 1.0 for its one step, whatever the server's code tried.
    assert [t["rewards"]["openenv_reward"] for t in traces] == [1.0, 1.0], traces
    found = read_reports(reports)
    assert len(found) == 2
    for report in found:
        assert_saw_only_what_it_was_given(report, planted)
