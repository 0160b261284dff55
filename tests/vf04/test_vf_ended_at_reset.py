"""verifiers 0.4: an eval of the keyed env (`tests/envs/keyed_env`) without its
`TEST_SERVICE_API_KEY` counts every episode as ended at its reset and says how to
forward the key in `vf-eval`'s flags (tests/test_ended_at_reset.py: `check` and 0.2).
"""

import json

from tests.servers import model_flags, policy_server
from tests.test_ended_at_reset import (
    KEY,
    KEYED_APP,
    KEYED_PROJECT,
    assert_demo_summary_counts,
)
from tests.vf04.evals import run_vf_eval, traces_of


def test_eval_counts_the_episodes_that_ended_at_their_reset(tmp_path, capsys):
    kwargs = json.dumps({"project_path": str(KEYED_PROJECT), "app": KEYED_APP})
    with policy_server("script", script=["go"]) as policy:
        proc, episodes = run_vf_eval(
            [
                *("openenv-v1", "--env.taskset.env", "local/keyed"),
                *("--env.taskset.provider-kwargs", kwargs),
                *("--env.taskset.resets", "[{}, {}]", "--no-rich"),
                *model_flags(policy),
            ],
            tmp_path,
            environ={KEY: ""},  # set but empty: the env has no key either way
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(episodes) == 2
    for episode in episodes:
        (error,) = episode["errors"]
        assert error["type"] == "OpenEnvError"
        message = error["message"]
        assert "the env ended the episode at its reset" in message, message
        assert f"{KEY} (read in server/app.py; listed in .env.example)" in message
        assert "`--env.taskset.forward-env`" in message
    traces = traces_of(episodes)
    assert len(traces) == 2
    for trace in traces:
        assert trace["metrics"]["openenv_ended_at_reset"] == 1.0
        assert trace["info"]["openenv"]["ended_at_reset"] is True
        assert "`--env.taskset.forward-env`" in trace["info"]["openenv"]["error"]
    (path,) = tmp_path.glob("outputs/*/traces.jsonl")
    assert_demo_summary_counts(path, capsys)
