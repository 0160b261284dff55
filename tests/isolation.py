"""The adversary's env (`tests/envs/snoop_env`) in a real eval, as an ordinary user
runs it, and what its report says: shared by both verifiers lines' tests."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from openenv_v1.core.launch.server_env import passed_names, user_uv_cache_dir
from tests.servers import TEST_ENVS

SNOOP_PROJECT = TEST_ENVS / "snoop_env"
SNOOP_APP = "server.app:app"
SNOOP_COMMAND = '{"command": "printenv; cat /proc/*/environ"}'
"""What the model sends the snoop env (any command does)."""
PLANTED = "OPENENV_V1_TEST_API_KEY"
"""A key in the eval's environment that is not forwarded: no env server may see it."""
AS_ORDINARY_USER = (
    ["setpriv", "--bounding-set=-all", "--inh-caps=-all", "--"]
    if os.geteuid() == 0
    else []
)
"""Run a command as an ordinary user would: as root, without any capability. Root's
CAP_SYS_PTRACE reads every process's /proc files; without capabilities the kernel
treats root's processes as any other user's (non-dumpable ones stay unreadable).
Nothing to do for a run that is not root."""
LAUNCHER_SET = {"UV_PROJECT_ENVIRONMENT", "PYTHONPATH", "VIRTUAL_ENV", "HOME", "TMPDIR"}
"""Set for the server by the launcher (`server_env`); TMPDIR by verifiers 0.2 for
a simulator, whose servers inherit it."""
UV_SETS = {"UV", "UV_RUN_RECURSION_DEPTH", "VIRTUAL_ENV_PROMPT"}
"""Set by `uv run` for the program it runs."""


def planted_secret() -> str:
    return f"sk-planted-{secrets.token_hex(8)}"


def snoop_kwargs(report_dir: Path) -> str:
    return json.dumps(
        {
            "project_path": str(SNOOP_PROJECT),
            "app": SNOOP_APP,
            "env_vars": {"SNOOP_REPORT_DIR": str(report_dir)},
        }
    )


def read_reports(report_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(report_dir.glob("*.json"))]


def _is_env_server(cmd: str) -> bool:
    """An env server started afresh, or a pool's template (`uvicorn_forks`) or one of
    the servers it forked, whose command line is the template's."""
    return (
        "uvicorn server.app:app" in cmd or "uvicorn_template.py server.app:app" in cmd
    )


def assert_saw_only_what_it_was_given(report: dict, planted: str) -> None:
    """The server's environment holds the allow-list, the launcher's settings, the
    report folder (its `env_vars`), and nothing of the eval's secrets; it found no
    secret anywhere, read no environment of the eval's own processes, and changed
    no reward."""
    env = report["env"]
    allowed = set(passed_names(os.environ)) | LAUNCHER_SET | UV_SETS
    allowed |= {"SNOOP_REPORT_DIR", "UV_CACHE_DIR", "UV_PYTHON_INSTALL_DIR"}
    assert set(env) <= allowed, set(env) - allowed
    assert not [n for n in env if n.startswith(("VF_", "MCP_"))]
    assert env["HOME"] != os.path.expanduser("~")
    assert Path(env["HOME"]).name.startswith("openenv-v1-home-")
    assert env["UV_CACHE_DIR"] == user_uv_cache_dir()
    assert report["found"] == []
    assert report["channels"] == 0 and report["tampered"] == []
    # What it could read are env servers (its own `uv run`, a pool's template,
    # other rollouts' servers, which hold what it holds), never one of the eval's
    # own processes (the eval, simulators, their fork server, tool servers). The one exception is verifiers'
    # own tool-server readiness probe, alive for a second or more under load: it
    # holds the eval's environment minus `*API_KEY*` names (docs/security.md says
    # so); `found` above proves nothing secret was in it.
    for cmd in report["readable"]:
        assert _is_env_server(cmd) or _is_verifiers_probe(cmd), report["readable"]
    assert planted not in json.dumps(report)


def _is_verifiers_probe(cmdline: str) -> bool:
    """verifiers 0.2's wait for a tool server (`verifiers.v1.mcp.launch._PROBE`): a
    `python3 -c` loop of `urlopen` on the server's loopback `/mcp` URL."""
    words = cmdline.split()
    return (
        cmdline.startswith("python3 -c ")
        and "urllib.request.urlopen(sys.argv[1], timeout=2)" in cmdline
        and bool(words)
        and words[-1].startswith("http://127.0.0.1:")
        and words[-1].endswith("/mcp")
    )
