"""An env that cannot play is never OK (verifiers 0.2 and `check`): the keyed env
(`tests/envs/keyed_env`) ends every episode at its reset unless its server has
`TEST_SERVICE_API_KEY`, which it reads with `os.environ.get` and lists in its
`.env.example`. `check` fails on it, naming the key and `--forward-env`, and plays
it once the key is forwarded; an eval counts the episodes that ended at their reset
and says how to forward the key in its own flags. The 0.4 eval is
tests/vf04/test_vf_ended_at_reset.py; the scanning itself, tests/test_env_variables.py.
"""

import argparse
import json
import os

from openenv_v1.cli import demo
from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    run_cli,
    run_eval,
)

KEYED_PROJECT = TEST_ENVS / "keyed_env"
KEYED_APP = "server.app:app"
KEY = "TEST_SERVICE_API_KEY"
TOKEN = "TEST_SERVICE_UPLOAD_TOKEN"


def keyed_check(*flags: str, env: dict[str, str]):
    return run_cli(
        *("check", "local/keyed", "--project-path", str(KEYED_PROJECT)),
        *("--app", KEYED_APP, "--probe-sessions", "0", *flags),
        env=env,
        timeout=240,
    )


def without_key() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (KEY, TOKEN)}


def test_check_fails_an_env_that_ends_its_episode_at_reset_and_names_the_key():
    proc = keyed_check("--action", "go", env=without_key())
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr[-2000:]
    assert "result      FAILED at reset" in out, out
    assert "the env ended the episode at its reset" in out
    assert f"{KEY} (read in server/app.py; listed in .env.example)" in out
    assert "forward them by name with `--forward-env`" in out
    assert "step " not in out  # no --action stepped after a reset that ended it


def test_check_plays_the_env_once_its_key_is_forwarded_and_names_the_token():
    """The step needs no token, so the check is OK; the token the env reads and
    the check does not pass is still named, as a warning."""
    proc = keyed_check(
        *("--forward-env", KEY, "--action", "go", "--json"),
        env={**without_key(), KEY: f"tsk-{os.getpid()}"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["ok"] and report["failure"] is None
    assert report["reset"]["done"] is False
    assert report["step"]["reward"] == 1.0
    (warning,) = [w for w in report["warnings"] if TOKEN in w]
    assert f"reads {TOKEN} (read in server/app.py)" in warning
    assert "`--forward-env`" in warning and KEY not in warning


def test_check_fails_a_step_whose_reply_says_it_lacks_a_variable():
    proc = keyed_check(
        *("--forward-env", KEY, "--action", "upload"),
        env={**without_key(), KEY: f"tsk-{os.getpid()}"},
    )
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr[-2000:]
    assert "result      FAILED at step" in out, out
    assert f"the env's step failed: {TOKEN} is not set on the server" in out
    assert f"reads {TOKEN} (read in server/app.py)" in out
    assert "forward it by name with `--forward-env`" in out


def test_eval_fails_an_episode_whose_step_lacks_a_variable(tmp_path):
    """No model can fix a missing token: the episode fails at that step, naming
    the token and the eval's flag, instead of playing on."""
    kwargs = json.dumps({"project_path": str(KEYED_PROJECT), "app": KEYED_APP})
    with policy_server("script", script=["upload"]) as policy:
        proc, traces = run_eval(
            [
                *("openenv-v1", "--taskset.env", "local/keyed"),
                *("--taskset.task.user.provider-kwargs", kwargs),
                *("--taskset.task.user.forward-env", json.dumps([KEY])),
                *("--no-rich", *model_flags(policy)),
            ],
            tmp_path,
            env={KEY: f"tsk-{os.getpid()}", TOKEN: ""},
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    message = error["message"]
    assert f"the step failed on what the env lacks: {TOKEN} is not set" in message
    assert f"reads {TOKEN} (read in server/app.py)" in message
    assert "`--taskset.task.user.forward-env`" in message
    assert trace["metrics"]["openenv_ended_at_reset"] == 0.0
    assert trace["info"]["openenv"]["steps"] == 1


def test_eval_counts_the_episodes_that_ended_at_their_reset(tmp_path, capsys):
    """Each episode fails, its error saying the env ended it at its reset and how
    to forward the key in the eval's own flags; metric `openenv_ended_at_reset`
    and `info.openenv.ended_at_reset` count it, and so does `openenv-v1 demo`'s
    summary of these traces."""
    kwargs = json.dumps({"project_path": str(KEYED_PROJECT), "app": KEYED_APP})
    with policy_server("script", script=["go"]) as policy:
        proc, traces = run_eval(
            [
                *("openenv-v1", "--taskset.env", "local/keyed"),
                *("--taskset.task.user.provider-kwargs", kwargs),
                *("--taskset.resets", "[{}, {}]", "--no-rich"),
                *model_flags(policy),
            ],
            tmp_path,
            env={KEY: ""},  # set but empty: the env has no key either way
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(traces) == 2
    for trace in traces:
        (error,) = trace["errors"]
        message = error["message"]
        assert "the env ended the episode at its reset" in message, message
        assert f"{KEY} (read in server/app.py; listed in .env.example)" in message
        assert "`--taskset.task.user.forward-env`" in message
        assert trace["metrics"]["openenv_ended_at_reset"] == 1.0
        assert trace["info"]["openenv"]["ended_at_reset"] is True
        assert trace["info"]["openenv"]["steps"] == 0
    (path,) = tmp_path.glob("outputs/*/*/traces.jsonl")
    assert_demo_summary_counts(path, capsys)


def assert_demo_summary_counts(path, capsys) -> None:
    """`openenv-v1 demo`'s summary of the traces at `path` (either line's), two
    episodes that both ended at their reset, says so."""
    assert demo.summarize(demo.read_traces(path)).ended_at_reset == 2
    args = argparse.Namespace(episodes=2, concurrency=1)
    assert demo._report(args, path.parent, 0, 1.0, 1.0) == 1  # errors: not OK
    out = capsys.readouterr().out
    assert "  at reset      2 of 2 (the env ended the episode at its reset" in out
