"""verifiers 0.4: a `vf-eval` against a server that speaks only HTTP
(`tests/envs/http_only_env.py`) ends its episode with the message naming what the
server speaks and what the adapter needs, as on 0.2 (`tests/test_http_only.py`)."""

from tests.servers import TEST_ENVS, model_flags, policy_server, uvicorn_server
from tests.test_http_only import NEEDS, SPEAKS
from tests.vf04.evals import run_vf_eval


def test_a_vf_eval_against_an_http_only_server_ends_its_episode_naming_it(tmp_path):
    with (
        uvicorn_server("http_only_env:app", app_dir=TEST_ENVS) as url,
        policy_server("solver") as policy,
    ):
        proc, episodes = run_vf_eval(
            ["openenv-v1", "--env.taskset.base-url", url] + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (episode,) = episodes
    (error,) = episode["errors"]
    assert error["type"] == "OpenEnvError"
    assert SPEAKS in error["message"] and NEEDS in error["message"]
