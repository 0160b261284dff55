"""The check and eval specs of the envs `recipes.py` prepares (issue 28): the keyword
arguments of `env_table.EnvSpec` for each, replacing its "skipped" row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DATA", "SPECS"]

DATA = Path(__file__).resolve().parent / "data"
"""The small data sets written here."""


def _j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _call(tool: str, **arguments: Any) -> str:
    return _j({"tool_name": tool, "arguments": arguments})


SPECS: dict[str, dict[str, Any]] = {
    "openspiel_env": {
        "docker_skip": "its Dockerfile builds FROM "
        "ghcr.io/meta-pytorch/openenv-openspiel-base:sha-e622c7e (OpenSpiel built "
        "from source; the name is unchanged at huggingface/OpenEnv 385de5eb), an "
        "image no registry reachable here has",
        "action": _j({"action_id": 1}),
        "script": [_j({"action_id": 1})] * 10,
        "max_turns": 12,
        "env_vars": {"OPENSPIEL_GAME": "catch"},
        "note": "PyPI open_spiel installed by compatibility/recipes.py on "
        "PYTHONPATH; OPENSPIEL_GAME=catch",
    },
    "finqa_env": {
        "docker_skip": "its Dockerfile downloads the FinQA data from Hugging Face "
        "while building (`RUN ... snapshot_download('snorkelai/finqa-data')`)",
        "action": _call("get_descriptions", company_name="alphabet"),
        "script": [
            _call("get_descriptions", company_name="alphabet"),
            _call(
                "sql_query",
                company_name="alphabet",
                table_name="income_statement",
                query='SELECT "2023", "2022" FROM income_statement '
                "WHERE item = 'Total revenues'",
            ),
            _call("submit_answer", answer="8.7%"),
        ],
        "max_turns": 4,
        "env_vars": {"FINQA_DATA_PATH": str(DATA / "finqa")},
        "note": "a one-question data set written here (compatibility/data/finqa)",
    },
    "agent_world_model_env": {
        "reset": {"scenario": "notes", "task_idx": 0},
        "action": _call("list_notes"),
        # Its `done` and `verify` tools are not in its tool list, so a model is never
        # offered them (and the adapter refuses unlisted tools): `max_turns` ends it.
        "script": [_call("list_notes"), _call("mark_done", note_id=2)],
        "max_turns": 2,
        "note": "a one-scenario data set written here "
        "(compatibility/data/agent_world_model: a notes service); its tools appear "
        "at reset",
    },
    "git_env": {
        "action": _j({"action_type": "list_repos"}),
        "script": [
            _j({"action_type": "list_repos"}),
            _j({"action_type": "clone_repo", "repo_name": "hello-world"}),
            _j(
                {
                    "action_type": "execute_git_command",
                    "command": "log --oneline",
                    "working_dir": "hello-world",
                }
            ),
        ],
        "max_turns": 3,
        "note": "Gitea stand-in (compatibility/gitea_standin.py: its repo API and "
        "`git http-backend`); the server's HOME a folder of its own (git_env writes "
        "~/.gitconfig and ~/.git-credentials); no reward or done by design",
    },
    "dm_control_env": {
        "reset": {"seed": 1},
        "action": _j({"values": [0.5]}),
        "script": [_j({"values": [0.5]}), _j({"values": [-0.5]})],
        "max_turns": 3,
        "env_vars": {"MUJOCO_GL": "disable"},
        "note": "its openenv from GitHub taken from a local git repo (GIT_CONFIG_*): "
        "the commit its uv.lock pins, from OPENENV_GIT_REPO or the tree's own clone "
        "(no lock: the tree committed afresh, UV_EXCLUDE_NEWER=2026-11-01, since "
        "mujoco 4.0.0 breaks dm_control 1.0.50); MUJOCO_GL=disable (no pixels); "
        "cartpole balance runs 1000 steps: `max_turns`",
    },
    "browsergym_env": {
        "docker_skip": "its Dockerfile builds FROM "
        "mcr.microsoft.com/playwright/python:v1.44.0-jammy (no registry reachable "
        "here has it), runs `playwright install chromium` (a browser download) and "
        "fetches MiniWoB from GitHub",
        "action": _j({"action_str": "noop()"}),
        # click-test's button is bid 13 in its accessibility tree.
        "script": [_j({"action_str": "click('13')"})],
        "max_turns": 2,
        "step_timeout": 150.0,
        "note": "Debian chromium as Playwright's chromium-1117; MiniWoB pages from "
        "PyPI miniwob 1.1.0 served on 127.0.0.1; BROWSERGYM_TASK_NAME=click-test",
    },
    "tbench2_env": {
        "action": _j({"action_type": "exec", "command": "cat add.py"}),
        "script": [
            _j({"action_type": "exec", "command": "sed -i 's/a - b/a + b/' add.py"}),
            _j({"action_type": "evaluate"}),
        ],
        "max_turns": 3,
        "env_vars": {"TB2_DEFAULT_TASK_ID": "fix-add", "TB2_MODE": "local"},
        "note": "a one-task set written here (compatibility/data/tbench2), copied "
        "fresh for each run; local mode (no Docker per task)",
    },
}
