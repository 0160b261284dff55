"""The Docker legs of `benchmarks/run.py`: the local Wordle env in containers.

`envs/wordle` has no Dockerfile of its own, so `wordle_image_folder()` writes a copy of
it with one, in the shape of OpenEnv's env Dockerfiles (`FROM` the OpenEnv base, the
dependencies installed with uv into the image, the env copied, uvicorn as the command).
The copy also holds a fresh `build-nonce` file, copied before the dependencies are
installed, so the first build of each benchmark run installs them again (from uv's
package cache in a BuildKit cache mount, as a rebuild of an edited env does): that is
the "first build" figure; "reused" is the next launch finding the image for the same
files.

`image_figures(folder)` measures those two and how long one container takes from
`docker run` to its first `/health` 200 (the median of `repeats`), each container
removed before the next. The eval legs (`docker-shared`, `docker-per-rollout`) are in
`run.workloads`; their containers carry the run label `run_label(name)`.
"""

from __future__ import annotations

import secrets
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from openenv_v1.core.launch.docker.cli import docker_cli  # noqa: E402
from openenv_v1.core.launch.docker.container import DockerLaunch  # noqa: E402
from openenv_v1.core.launch.docker.image import ensure_env_image  # noqa: E402
from openenv_v1.core.launch.docker.options import DockerOptions  # noqa: E402
from openenv_v1.core.launch.docker.reaper import RUN_LABEL  # noqa: E402

WORDLE_DOCKERFILE = """\
ARG BASE_IMAGE=ghcr.io/meta-pytorch/openenv-base:latest
FROM ${BASE_IMAGE}
WORKDIR /app/env
COPY build-nonce /app/env/
RUN --mount=type=cache,target=/root/.cache/uv \\
    uv pip install --system "openenv>=0.10,<0.11" "english-words>=2.0,<3" \\
    "uvicorn>=0.30"
COPY . /app/env
ENV PYTHONPATH=/app/env
CMD ["uvicorn", "wordle_env.server.app:app", "--host", "0.0.0.0", "--port", "8000"]
"""
RUN_ID_PREFIX = "openenv-v1-bench"


@dataclass
class ImageFigures:
    image: str
    first_build_s: float
    reused_s: float
    container_start_s: float
    """Median seconds from `docker run` to a ready server."""
    container_starts: list[float]


def wordle_image_folder(parent: Path) -> Path:
    """A copy of `envs/wordle` with a Dockerfile and a fresh build nonce."""
    folder = parent / "wordle"
    shutil.copytree(
        ROOT / "envs" / "wordle",
        folder,
        ignore=shutil.ignore_patterns(".venv", "__pycache__"),
    )
    (folder / "Dockerfile").write_text(WORDLE_DOCKERFILE)
    (folder / "build-nonce").write_text(secrets.token_hex(8) + "\n")
    return folder


def image_figures(folder: Path, repeats: int = 3) -> ImageFigures:
    first = ensure_env_image(folder)
    if first.reused:
        raise SystemExit(f"{first.image} was already built: no first build to time")
    reused = ensure_env_image(folder)
    starts = []
    for _ in range(repeats):
        launch = DockerLaunch(
            env="local/wordle",
            options=DockerOptions(image=first.image),
            launch_timeout_s=120,
        )
        try:
            launch.start()
            launch.wait_for_ready()
            assert launch.start_seconds is not None
            starts.append(launch.start_seconds)
        finally:
            launch.stop(grace_s=0)
    return ImageFigures(
        image=first.image,
        first_build_s=first.seconds,
        reused_s=reused.seconds,
        container_start_s=statistics.median(starts),
        container_starts=starts,
    )


def run_label(name: str) -> tuple[str, str]:
    """(run id, `label=value` filter) of a leg's containers."""
    run_id = f"{RUN_ID_PREFIX}-{name}-{secrets.token_hex(3)}"
    return run_id, f"{RUN_LABEL}={run_id}"


def docker_config(folder: Path, resets: str, shared: bool) -> str:
    """The `eval` config of a Docker leg: the image built from `folder`, containers
    on this host, shared (the default) or one per rollout."""
    return (
        f'[taskset]\nid = "openenv-v1"\nenv = "local/wordle"\nresets = [{resets}]\n'
        f"use_docker = true\ndocker_on_host = true\n"
        f"shared_servers = {str(shared).lower()}\n\n"
        f'[taskset.task.user.provider_kwargs]\nproject_path = "{folder}"\n'
    )


def containers_left(label: str) -> int:
    """Containers still carrying `label` (they are then removed)."""
    listed = subprocess.run(
        [docker_cli(), "ps", "-aq", "--filter", f"label={label}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    ids = listed.stdout.split()
    if ids:
        subprocess.run(
            [docker_cli(), "rm", "-f", *ids], capture_output=True, timeout=60
        )
    return len(ids)
