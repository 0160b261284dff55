"""The `openenv-v1` console script, run as a user runs it, against real servers."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.servers import (
    TEST_ENVS,
    WORDLE_APP,
    WORDLE_PROJECT,
    assert_crash_read_not_waited_out,
    free_port,
    processes_matching,
    run_cli,
    uvicorn_server,
)

CLI = Path(sys.executable).parent / "openenv-v1"


def uv_wordle(app: str, port: int, **provider_kwargs) -> list[str]:
    """`check` flags launching the local Wordle project with UV on a known port, so
    its processes can be told apart from other tests' servers."""
    kwargs = json.dumps({"port": port, **provider_kwargs})
    return [
        "local/wordle",
        "--project-path",
        str(WORDLE_PROJECT),
        "--app",
        app,
        "--provider-kwargs",
        kwargs,
    ]


def gone(*needles: str, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while processes_matching(*needles) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_matching(*needles) == []


def interrupt_once_running(
    proc: subprocess.Popen, *needles: str, timeout: float
) -> tuple[str, str]:
    """Ctrl-C `proc` as soon as a process matching `needles` runs (within 60 s), and
    return its output; it must exit within `timeout` (it is killed otherwise)."""
    try:
        deadline = time.monotonic() + 60
        while not processes_matching(*needles):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_check_base_url_reports_schema_reset_step_seed_and_sessions(wordle_url):
    proc = run_cli(
        "check",
        "--base-url",
        wordle_url,
        "--reset",
        '{"seed": 1}',
        "--action",
        "[crane]",
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "health      healthy" in out
    assert "wordle 0.1.0" in out
    assert "WordleAction" in out and "message: string (required)" in out
    assert '{"seed": 1} -> reward 0.0, done false' in out
    assert '{"message": "[crane]"} -> reward' in out
    assert "seed check  match: same reset and step results" in out
    assert "at least 4 concurrent" in out
    assert "result      OK" in out


def test_check_json_on_a_uv_launch_finds_the_session_limit():
    port = free_port()
    one_session = {"env_vars": {"WORDLE_MAX_SESSIONS": "1"}}
    proc = run_cli(
        "check",
        *uv_wordle(WORDLE_APP, port, **one_session),
        "--reset",
        '{"seed": 3}',
        "--action",
        '{"message": "[crane]"}',
        "--json",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["failure"] is None
    assert report["server_url"] == f"http://127.0.0.1:{port}"
    assert report["health"] == "healthy"
    assert report["metadata"]["name"] == "wordle"
    (field,) = report["action"]["fields"]
    assert (field["name"], field["type"], field["required"]) == (
        "message",
        "string",
        True,
    )
    assert report["reset"]["observation"]["prompt"].startswith("You are Player 0")
    assert report["step"]["action"] == {"message": "[crane]"}
    assert "C R A N E" in report["step"]["observation"]["prompt"]
    # Two fresh sessions, one after the other, on a one-session server.
    assert report["seed_check"] == {
        "status": "match",
        "compared": ["reset", "step"],
        "differences": [],
    }
    assert report["sessions"]["status"] == "refused"
    assert report["sessions"]["max_sessions"] == 1
    assert gone(f"--port {port}")


def test_check_lists_the_tools_of_an_mcp_env(counter_url):
    proc = run_cli(
        "check",
        "--base-url",
        counter_url,
        "--reset",
        '{"start": 1}',
        "--action",
        '{"tool_name": "add", "arguments": {"n": 2}}',
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "MCP tool calls (server action CallToolAction)" in out
    assert "add(n: integer)  Add n to the counter" in out
    assert "peek()  Return the counter" in out
    assert "submit(answer: integer)  Submit the final counter value" in out
    assert "-> reward 0.25, done false" in out
    # Without a seed in --reset: does the env honour seeds? (The counter ignores them.)
    assert "seed check  ignored: seeds 1 and 2 gave the same reset" in out


def test_check_fails_within_its_timeout_when_list_tools_never_answers():
    with uvicorn_server("counter_env:hanging_app", app_dir=TEST_ENVS) as url:
        started = time.monotonic()
        proc = run_cli("check", "--base-url", url, "--timeout", "3", "--json")
        elapsed = time.monotonic() - started
    report = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert report["failure"]["stage"] == "schema"
    assert "the list_tools step did not answer within 3s" in report["failure"]["error"]
    assert "openenv-core" in report["failure"]["hint"]
    assert elapsed < 30


def test_check_wrong_app_fails_fast_with_the_servers_own_error():
    port = free_port()
    proc = run_cli("check", *uv_wordle("wordle_env.no_such_module:app", port))
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr
    assert "FAILED at launch" in out
    assert "ModuleNotFoundError" in out
    assert 'Could not import module "wordle_env.no_such_module"' in out  # uvicorn's
    assert "; check `--app` (`module:attribute` importable from the env" in out
    assert "hint        the app is named as `package.module:attribute`" in out
    assert_crash_read_not_waited_out(out)
    assert gone(f"--port {port}")


def test_check_closed_port_names_the_url_and_errno_as_json():
    url = f"http://127.0.0.1:{free_port()}"
    proc = run_cli("check", "--base-url", url, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    failure = report["failure"]
    assert not report["ok"] and failure["stage"] == "connect"
    assert url in failure["error"] and "ECONNREFUSED" in failure["error"]
    assert "nothing is listening" in failure["hint"]


def test_ctrl_c_during_a_launch_stops_the_server_at_once():
    port = free_port()
    proc = subprocess.Popen(
        [str(CLI), "check", *uv_wordle(WORDLE_APP, port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, _ = interrupt_once_running(proc, f"--port {port}", timeout=15)
    assert proc.returncode == 130
    assert "interrupted" in out
    assert gone(f"--port {port}")


@pytest.mark.parametrize("tool_calls", ["text", "native"])
def test_demo_runs_an_eval_summarizes_it_and_stops_everything(tmp_path, tool_calls):
    env_port, policy_port = free_port(), free_port()
    proc = run_cli(
        "demo",
        "--tool-calls",
        tool_calls,
        "--episodes",
        "2",
        "--concurrency",
        "2",
        "--env-port",
        str(env_port),
        "--policy-port",
        str(policy_port),
        cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    assert "episodes      2 of 2 (2 at a time)" in out
    assert "solved        2/2 (reward >= 1)" in out
    assert "mean reward   1.00" in out
    (traces,) = tmp_path.glob("outputs/*/*/traces.jsonl")
    assert f"traces        {traces}" in out
    lines = traces.read_text().splitlines()
    assert len(lines) == 2
    if tool_calls == "native":
        for line in lines:
            calls = [
                call["name"]
                for node in json.loads(line)["nodes"]
                for call in (node.get("message") or {}).get("tool_calls") or ()
            ]
            assert calls and set(calls) == {"act"}
    assert gone(f"--port {env_port}")
    assert gone(f"--port {policy_port}")
    assert gone(str(tmp_path))  # the eval (`-o` under tmp_path) and its children


def demo_args(env_port: int, policy_port: int) -> list[str]:
    return ["demo", "--env-port", str(env_port), "--policy-port", str(policy_port)]


def test_demo_on_a_taken_port_fails_at_once_and_stops_the_policy(wordle_url, tmp_path):
    taken = int(wordle_url.rsplit(":", 1)[1])
    policy_port = free_port()
    proc = run_cli(*demo_args(taken, policy_port), cwd=tmp_path, timeout=60)
    assert proc.returncode == 1
    assert "the local Wordle env did not start" in proc.stderr
    assert "Address already in use" in proc.stderr
    assert gone(f"--port {policy_port}")


def test_ctrl_c_during_the_demo_eval_stops_everything(tmp_path):
    env_port, policy_port = free_port(), free_port()
    proc = subprocess.Popen(
        [str(CLI), *demo_args(env_port, policy_port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = interrupt_once_running(proc, "eval", str(tmp_path), timeout=60)
    assert proc.returncode == 130
    assert "interrupted; stopping everything it started" in err
    assert gone(f"--port {env_port}")
    assert gone(f"--port {policy_port}")
    assert gone(str(tmp_path))
