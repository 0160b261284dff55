"""How each setting the core names is spelled on each surface (verifiers 0.2's `eval`,
verifiers 0.4's `vf-eval`, `openenv-v1 check`), and a walk of a config model along a
flag's path: shared by the tests of both verifiers lines (no verifiers import)."""

from typing import Any, get_args, get_origin

from pydantic import BaseModel

from openenv_v1.cli.flags import CHECK_FLAGS
from openenv_v1.core.setting_names import Surface
from openenv_v1.vf02.flags import EVAL_FLAGS
from openenv_v1.vf04.flags import VF_EVAL_FLAGS

SURFACES: tuple[Surface, Surface, Surface] = (EVAL_FLAGS, VF_EVAL_FLAGS, CHECK_FLAGS)
"""Each surface's spelling, as its binding defines it, in the order of `SPELLINGS`."""

# setting -> (verifiers 0.2, verifiers 0.4, check)
SPELLINGS: dict[str, tuple[str, str, str]] = {
    "provider_kwargs": (
        "--taskset.task.user.provider-kwargs",
        "--env.taskset.provider-kwargs",
        "--provider-kwargs",
    ),
    "provider_kwargs.app": (
        "--taskset.task.user.provider-kwargs.app",
        "--env.taskset.provider-kwargs.app",
        "--app",
    ),
    "provider_kwargs.project_path": (
        "--taskset.task.user.provider-kwargs.project-path",
        "--env.taskset.provider-kwargs.project-path",
        "--project-path",
    ),
    "provider_kwargs.image": (
        "--taskset.task.user.provider-kwargs.image",
        "--env.taskset.provider-kwargs.image",
        "--provider-kwargs '{\"image\": ...}'",
    ),
    "forward_env": (
        "--taskset.task.user.forward-env",
        "--env.taskset.forward-env",
        "--forward-env",
    ),
    "server_web_ui": (
        "--taskset.task.user.server-web-ui",
        "--env.taskset.server-web-ui",
        "--web-ui",
    ),
    "launch_timeout_s": (
        "--taskset.task.user.launch-timeout-s",
        "--env.taskset.launch-timeout-s",
        "--launch-timeout",
    ),
    "reset_timeout_s": (
        "--taskset.task.user.reset-timeout-s",
        "--env.taskset.reset-timeout-s",
        "--timeout",
    ),
    "step_timeout_s": (
        "--taskset.task.user.step-timeout-s",
        "--env.taskset.step-timeout-s",
        "--timeout",
    ),
    # `check` runs no episode budget: the neutral name stays.
    "episode_timeout_s": (
        "--taskset.task.user.episode-timeout-s",
        "--env.taskset.episode-timeout-s",
        "episode_timeout_s",
    ),
    "base_url": ("--taskset.base-url", "--env.taskset.base-url", "--base-url"),
    "provider": ("--taskset.provider", "--env.taskset.provider", "--provider"),
    "use_docker": ("--taskset.use-docker", "--env.taskset.use-docker", "--use-docker"),
    # `check` takes the env as its ENV_ID argument, and runs no pool of servers.
    "env": ("--taskset.env", "--env.taskset.env", "env"),
    "max_servers": (
        "--taskset.max-servers",
        "--env.taskset.max-servers",
        "max_servers",
    ),
}


def field_at(model: type[BaseModel], flag: str, prefix: str) -> Any:
    """The field of `model` that `flag` (`<prefix>a-b.c-d`) sets, as verifiers' CLI
    reads it (`-` is `_`); a key below a dict field is that dict's. Raises KeyError
    naming the part of the path that `model` does not have."""
    assert flag.startswith(prefix), flag
    node: Any = model
    for part in flag[len(prefix) :].replace("-", "_").split("."):
        if node is dict:
            return dict
        field = node.model_fields.get(part)
        if field is None:
            raise KeyError(f"{flag}: {node.__name__} has no field {part!r}")
        annotation = field.annotation
        origin = get_origin(annotation)
        if origin is dict:
            node = dict
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            node = annotation
        else:
            model_args = [
                a
                for a in get_args(annotation)
                if isinstance(a, type) and issubclass(a, BaseModel)
            ]
            node = model_args[0] if model_args else field
    return node
