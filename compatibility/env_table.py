"""The env list of the compatibility run: for each env folder of OpenEnv's `envs/`,
the reset, the one action `check` steps with and the eval's script of replies, or why
it cannot run here (`skip`, with the cause seen when it was run).

The specs of the envs that `recipes.py` prepares (issue 28) replace their rows."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from typing import Any

from compatibility import recipe_specs

__all__ = ["ENVS", "EnvSpec", "step_timeout"]


def j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


@dataclass(frozen=True)
class EnvSpec:
    reset: dict[str, Any] = field(default_factory=dict)
    action: str | None = None
    """One reply for the check's step, as a model would write it."""
    script: list[str] | None = None
    """Replies for the eval, by turn; None: no eval."""
    max_turns: int = 10
    env_vars: dict[str, str] = field(default_factory=dict)
    """Passed to the server (`provider_kwargs.env_vars`)."""
    web_ui: bool = False
    """Let the server import gradio (`--web-ui`)."""
    skip: str | None = None
    """Why the env cannot run here; not run unless --all."""
    step_timeout: float | None = None
    """A floor for `--step-timeout` (a browser's reset takes a minute here)."""
    docker_skip: str | None = None
    """Why the env's Dockerfile cannot build or run here; `--docker` skips it
    unless --all."""
    docker_kwargs: dict[str, Any] = field(default_factory=dict)
    """More `provider_kwargs` with `--docker` only (e.g. `{"egress": True}` for an
    env whose server downloads at start: containers have no egress by default)."""
    note: str = ""


def step_timeout(spec: EnvSpec, args: argparse.Namespace) -> float:
    return max(args.step_timeout, spec.step_timeout or 0.0)


def call(tool: str, **arguments: Any) -> str:
    """An MCP env's tool call as a model would write it."""
    return j({"tool_name": tool, "arguments": arguments})


def moves(field_name: str, values: list[Any]) -> list[str]:
    return [j({field_name: v}) for v in values]


# Maze: the default 8x8 maze, start (0,0), exit (7,7); 3 = right, 1 = down.
MAZE_PATH = [3, 3, 3, 3, 1, 1, 3, 3, 1, 3, 1, 1, 1, 1]


# Chess: white to move has one legal move (h1h2), then black mates (b4h4). The env
# gives the agent a random colour: as white it plays h1h2 and is mated; as black
# the opponent plays h1h2 first, the agent's h1h2 is refused (-0.1), b4h4 mates.
CHESS_FEN = "5k2/8/6r1/8/1r6/8/8/7K w - - 0 1"


DIPG_REPLY = (
    "<|channel|>analysis<|message|>The context does not say.<|end|>"
    "<|channel|>proof<|message|>No quote supports an answer.<|end|>"
    "<|channel|>final<|message|>The provided sources do not contain the answer.<|end|>"
)


ENVS: dict[str, EnvSpec] = {
    # --- runnable offline ---
    "connect4_env": EnvSpec(
        action=j({"column": 3}),
        # The agent plays both colours: column 0 four times for the first player.
        script=moves("column", [0, 1, 0, 1, 0, 1, 0]),
    ),
    "chess_env": EnvSpec(
        reset={"fen": CHESS_FEN},
        action=j({"move": "h1h2"}),
        script=moves("move", ["h1h2", "b4h4"]),
        max_turns=4,
    ),
    "maze_env": EnvSpec(
        reset={"seed": 1},
        action=j({"action": 3}),
        script=moves("action", MAZE_PATH),
        max_turns=20,
    ),
    "grid_world_env": EnvSpec(
        docker_skip="its Dockerfile builds FROM envtorch-base:latest, an image no "
        "registry has (seen failing on 2026-12-01)",
        action=j({"action": "DOWN"}),
        script=moves("action", ["DOWN"] * 4 + ["RIGHT"] * 4),
        max_turns=12,
    ),
    "wildfire_env": EnvSpec(
        action=j({"action": "wait"}),
        script=[j({"action": "water", "x": 1, "y": 1}), j({"action": "wait"})],
        max_turns=4,
        note="no end in 4 turns by design (fire burns out or 128 steps)",
    ),
    "reasoning_gym_env": EnvSpec(
        action="100",
        # The default leg_counting dataset (seed 42): the first question's answer.
        script=["100"],
        max_turns=2,
    ),
    "snake_env": EnvSpec(
        action=j({"action": 0}),
        script=moves("action", [0]),
        max_turns=30,
    ),
    "coding_env": EnvSpec(
        action="print(6 * 7)",
        script=["print(6 * 7)", j({"code": "import math\nprint(math.pi)"})],
        max_turns=2,
        note="never done by design",
    ),
    "repl_env": EnvSpec(
        action=j({"code": "x = 6 * 7\nprint(x)"}),
        script=[
            j({"code": "x = 6 * 7\nprint(x)"}),
            j({"code": "", "is_final": True, "final_answer": "42"}),
        ],
        max_turns=3,
    ),
    "dipg_safety_env": EnvSpec(
        action=j({"llm_response": DIPG_REPLY}),
        script=[DIPG_REPLY],
        max_turns=2,
    ),
    "carla_env": EnvSpec(
        action=j({"action_type": "observe"}),
        script=[j({"action_type": "observe"}), j({"action_type": "emergency_stop"})],
        max_turns=3,
        note="CARLA_MODE=mock (the default): simulated physics, no CARLA server",
        skip="its `carla` extra makes uv's lock unsatisfiable (carla-ue5-api needs "
        "Python >= 3.11, requires-python says >= 3.10) and its uv.lock is stale; "
        "with requires-python >= 3.11 it launches and steps in mock mode",
    ),
    "textarena_env": EnvSpec(
        action="[50]",
        # 1..20 in 10 guesses, no feedback read: a loss unless the number is low.
        script=[f"[{n}]" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)],
        max_turns=12,
        env_vars={
            "TEXTARENA_ENV_ID": "GuessTheNumber-v0",
            "TEXTARENA_DOWNLOAD_NLTK": "0",
        },
        note="GuessTheNumber-v0: the default Wordle-v0 needs NLTK `words` data",
    ),
    "atari_env": EnvSpec(
        action=j({"action_id": 0}),
        script=moves("action_id", [0, 1]),
        max_turns=3,
        note="rgb frames go to the model as PNG images",
    ),
    "git_env": EnvSpec(
        action=j({"action_type": "list_repos"}),
        script=[j({"action_type": "list_repos"})],
        max_turns=2,
        skip="needs its Gitea server (GITEA_URL): without one, building each "
        "session's env waits about 30 s for it and every git action fails",
    ),
    "echo_env": EnvSpec(
        action=j({"tool_name": "echo_message", "arguments": {"message": "hi"}}),
        script=[j({"tool_name": "echo_message", "arguments": {"message": "hi"}})],
        max_turns=2,
    ),
    "sumo_rl_env": EnvSpec(
        action=j({"phase_id": 0}),
        script=moves("phase_id", [0, 1]),
        max_turns=3,
        env_vars={
            "SUMO_NET_FILE": "{env}/nets/single-intersection/single-intersection.net.xml",
            "SUMO_ROUTE_FILE": "{env}/nets/single-intersection/single-intersection.rou.xml",
        },
        note="net files from the env's nets/ (the default paths are the image's)",
        skip="needs the SUMO simulator binary (`sumo` on PATH / SUMO_HOME; apt in "
        "its image, not a dependency): its factory fails with FileNotFoundError "
        "'sumo'",
    ),
    "finrl_env": EnvSpec(
        action=j({"actions": [0.0]}),
        script=[j({"actions": [0.5]}), j({"actions": [-0.5]})],
        max_turns=3,
        note="the built-in sample data (no FINRL_CONFIG_PATH)",
    ),
    # --- E2B sandboxes (huggingface/OpenEnv, new since 685de41): each reads
    # E2B_API_KEY; without it the reset ends the episode, which `check` fails. ---
    "coding_tools_env": EnvSpec(
        action=call("bash", command="echo hi"),
        script=[call("bash", command="echo hi"), call("submit_solution")],
        max_turns=3,
    ),
    "jupyter_env": EnvSpec(
        action=call("add_and_execute_code_cell", code="print(6 * 7)"),
        script=[call("add_and_execute_code_cell", code="print(6 * 7)")],
        max_turns=2,
    ),
    "terminus_env": EnvSpec(
        action=call("terminal", command="echo hi"),
        script=[
            call("terminal", command="echo hi"),
            call("terminal", final_answer="hi"),
        ],
        max_turns=3,
    ),
    "opencode_env": EnvSpec(
        action=call(
            "run_rollout",
            base_url="http://127.0.0.1:9/v1",
            api_key="none",
            model="none",
            instruction="Write hello.txt containing hi.",
        ),
    ),
    # --- known not to run offline here ---
    "openspiel_env": EnvSpec(
        action=j({"action_id": 1}),
        skip="needs OpenSpiel (`pyspiel`), not in its dependencies: built from "
        "source in its Docker image",
    ),
    "calendar_env": EnvSpec(
        action=j({"tool_name": "list_calendars", "arguments": {}}),
        skip="a custom server (MCPHTTPEnvServer): HTTP /reset /step /state /mcp "
        "only, no OpenEnv WebSocket /ws (403): refused at launch, naming that",
    ),
    "websearch_env": EnvSpec(
        action=j({"query": "OpenEnv"}),
        skip="needs a SERPER_API_KEY and network (google.serper.dev): without them "
        "a step answers `[ERROR] Search failed ...` (its /schema 500 of 685de41 is "
        "fixed at huggingface/OpenEnv 385de5eb)",
    ),
    "chat_env": EnvSpec(
        action=j({"tokens": [15496]}),
        skip="downloads a tokenizer from Hugging Face for each env instance "
        "(TOKENIZER_NAME, default gpt2): offline, its reset does not answer within "
        "30 s and /metadata answers 500 (FACTORY_ERROR at 685de41)",
    ),
    "finqa_env": EnvSpec(
        action=j({"tool_name": "get_descriptions", "arguments": {}}),
        skip="needs the FinQA data from Hugging Face (download_data.sh, "
        "FINQA_DATA_PATH): FileNotFoundError benchmark_questions/finqa.csv",
    ),
    "agent_world_model_env": EnvSpec(
        action=j({"tool_name": "list_scenarios", "arguments": {}}),
        skip="reset needs a `scenario`, whose data it downloads from Hugging Face "
        "(hf_hub_download); an LLM endpoint (OPENENV_AWM_LLM_*) for some verifiers",
    ),
    "tbench2_env": EnvSpec(
        skip="downloads the Terminal-Bench 2 repo at reset (urlopen: Name or "
        "service not known); tasks run in Docker",
    ),
    "kernrl": EnvSpec(
        docker_skip="its image installs torch and triton (CUDA wheels, several GB): "
        "not built on this shared machine",
        action=j({"code": "import torch\nclass Model(torch.nn.Module):\n    pass\n"}),
        script=[j({"code": "import torch\nclass Model(torch.nn.Module):\n    pass\n"})],
        max_turns=1,
        note="launches and steps (torch + triton, 5.5 GB venv), but kernels cannot "
        "be checked without an NVIDIA GPU: correctness FAIL on every step",
    ),
    "julia_env": EnvSpec(
        action=j({"core_code": "println(1)"}),
        skip="needs a Julia installation (not on PyPI): `check` passes (launch, "
        "reset, a step answered), but every step answers 'Julia not found in PATH. "
        "Please install Julia.' (exit_code 127)",
    ),
    "browsergym_env": EnvSpec(
        skip="needs BROWSERGYM_TASK_NAME, the MiniWoB pages (MINIWOB_URL, a clone "
        "of miniwob-plusplus) and Playwright browsers (`playwright install`); "
        "without a task name its app fails at import",
    ),
    "openapp_env": EnvSpec(
        skip="does not declare openenv (ModuleNotFoundError: No module named "
        "'openenv' at start: its pyproject leaves it to a `pip install --no-deps`); "
        "needs Playwright browsers and an OpenApps server (OPENAPPS_URL)",
    ),
    "dm_control_env": EnvSpec(
        skip="depends on openenv-core from git+https://github.com (no GitHub here)",
    ),
    "unity_env": EnvSpec(
        skip="requires-python >=3.10.1,<=3.10.12 (no such Python here, and uv "
        "cannot download one offline); depends on mlagents-envs and openenv from "
        "git+https://github.com and downloads Unity builds",
    ),
}

# The envs whose needs compatibility/recipes.py meets replace their "skipped" rows.
ENVS.update({name: EnvSpec(**spec) for name, spec in recipe_specs.SPECS.items()})
