"""An env server that speaks only HTTP (`tests/envs/http_only_env.py`, shaped like
OpenEnv's `calendar_env`: `/reset`, `/step`, `/state`, `/mcp`, no `/ws`) is refused,
by `check` and by an eval, with a message that names what it speaks and what the
adapter needs, not a bare `HTTP 403`; a server that refuses the WebSocket and serves
none of OpenEnv's routes keeps its raw cause.
"""

import pytest

from openenv_v1.cli.check import CheckOptions, CheckReport, run_check
from openenv_v1.core.launch.http_only import refused_upgrade
from openenv_v1.core.launch.target import EnvTarget
from tests.servers import (
    TEST_ENVS,
    model_flags,
    policy_server,
    run_cli,
    run_eval,
    uvicorn_server,
)

SPEAKS = (
    "it speaks only HTTP (POST /reset, POST /step, GET /state, POST /mcp; its /ws "
    "refused the WebSocket upgrade: HTTP 403)"
)
NEEDS = "openenv-v1 needs OpenEnv's WebSocket session API at /ws"


@pytest.fixture(scope="module")
def http_only_url():
    with uvicorn_server("http_only_env:app", app_dir=TEST_ENVS) as url:
        yield url


def test_check_refuses_an_http_only_server_naming_what_it_speaks(http_only_url):
    proc = run_cli("check", "--base-url", http_only_url)
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "FAILED at connect" in out
    assert f"cannot connect to the OpenEnv server at {http_only_url}: {SPEAKS}" in out
    assert NEEDS in out and "build a fresh env per request" in out
    assert "create_app" in out


def test_an_eval_against_an_http_only_server_ends_its_rollout_naming_it(
    http_only_url, tmp_path
):
    with policy_server("solver") as policy:
        proc, traces = run_eval(
            ["openenv-v1", "--taskset.base-url", http_only_url] + model_flags(policy),
            tmp_path,
        )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (trace,) = traces
    (error,) = trace["errors"]
    assert error["type"] == "UserError"
    assert SPEAKS in error["message"] and NEEDS in error["message"]


async def test_without_an_openapi_document_its_routes_are_found_by_a_get_each():
    with uvicorn_server("http_only_env:no_openapi_app", app_dir=TEST_ENVS) as url:
        report = CheckReport(target={"base_url": url})
        await run_check(CheckOptions(EnvTarget(base_url=url)), report)
    assert report.failure is not None and report.failure.stage == "connect"
    assert SPEAKS in report.failure.error and NEEDS in report.failure.error


async def test_a_refused_websocket_on_a_server_without_openenv_routes_stays_raw():
    with uvicorn_server("http_only_env:health_only_app", app_dir=TEST_ENVS) as url:
        report = CheckReport(target={"base_url": url})
        await run_check(CheckOptions(EnvTarget(base_url=url)), report)
    assert report.failure is not None and report.failure.stage == "connect"
    assert "rejected WebSocket connection: HTTP 403" in report.failure.error
    assert "speaks only HTTP" not in report.failure.error


def test_the_refused_upgrade_is_read_from_the_error_or_its_cause():
    class Response:
        status_code = 404

    class InvalidStatus(Exception):
        response = Response()

    try:
        try:
            raise InvalidStatus("server rejected WebSocket connection")
        except InvalidStatus as cause:
            raise ConnectionError("Failed to connect to ws://x/ws") from cause
    except ConnectionError as e:
        assert refused_upgrade(e) == 404
    text = ConnectionError("server rejected WebSocket connection: HTTP 403")
    assert refused_upgrade(text) == 403
    assert refused_upgrade(ConnectionRefusedError(111, "Connection refused")) is None
