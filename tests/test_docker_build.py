"""Images built from env folders with a real engine: the build context is picked as
OpenEnv's `openenv build` tells an in-repo env from a standalone one, and the inputs
the tag hashes are the files the image is made of.

The env layouts are written here, under names no other test uses (`inrepo_env`), and
their images removed at the end."""

from __future__ import annotations

import pytest

from openenv_v1.core.docker_image import ensure_env_image
from tests import docker_engine

BASE = "ghcr.io/meta-pytorch/openenv-base:latest"


def remove_images(reference: str) -> None:
    found = docker_engine.docker(
        "images", "-q", "--filter", f"reference={reference}", check=False
    )
    if found.stdout.split():
        docker_engine.docker("rmi", "-f", *set(found.stdout.split()), check=False)


def run_in(image: str, *command: str) -> str:
    """What `command` prints in a fresh container of `image` (removed after)."""
    return docker_engine.docker(
        "run",
        "--rm",
        "--network",
        "none",
        "--entrypoint",
        command[0],
        image,
        *command[1:],
    ).stdout


@pytest.fixture
def repo(real_docker, tmp_path):
    """A repo laid out like OpenEnv's: `envs/inrepo_env` whose Dockerfile, written to
    be built from the repo root, copies the env folder and a shared folder beside
    `envs/`."""
    root = tmp_path / "repo"
    env = root / "envs" / "inrepo_env"
    (env / "server").mkdir(parents=True)
    (root / "shared").mkdir()
    (root / "shared" / "note.txt").write_text("from the repo root\n")
    (root / "README.md").write_text("not copied by the image\n")
    (env / "models.py").write_text("NAME = 'inrepo'\n")
    (env / "server" / "Dockerfile").write_text(
        "# Build from repo root:\n"
        "#   docker build -f envs/inrepo_env/server/Dockerfile .\n"
        f"FROM {BASE}\n"
        "ARG BUILD_MODE=unset\n"
        "COPY envs/inrepo_env/ /app/env/\n"
        "COPY --chown=root:root \\\n"
        "    shared/ /app/shared/\n"
        'RUN echo "$BUILD_MODE" > /app/mode\n'
    )
    yield root
    remove_images("openenv-v1/inrepo_env")
    remove_images("openenv-v1/standalone_env")


def test_an_in_repo_dockerfile_that_copies_from_the_repo_root_builds_from_it(repo):
    env = repo / "envs" / "inrepo_env"
    built = ensure_env_image(env)
    assert not built.reused
    assert built.source.endswith(f"(context {repo}, as the Dockerfile copies from it)")
    assert run_in(built.image, "cat", "/app/shared/note.txt") == "from the repo root\n"
    assert run_in(built.image, "cat", "/app/env/models.py") == "NAME = 'inrepo'\n"
    assert run_in(built.image, "cat", "/app/mode") == "in-repo\n"

    # The rest of the repo is not an input: editing it reuses the image...
    (repo / "README.md").write_text("edited\n")
    assert ensure_env_image(env).image == built.image
    assert ensure_env_image(env).reused
    # ...while a copied file outside the env folder is: editing it rebuilds.
    (repo / "shared" / "note.txt").write_text("edited at the root\n")
    rebuilt = ensure_env_image(env)
    assert rebuilt.image != built.image and not rebuilt.reused
    assert (
        run_in(rebuilt.image, "cat", "/app/shared/note.txt") == "edited at the root\n"
    )


def test_an_env_folder_whose_dockerfile_copies_itself_builds_standalone(repo):
    """A Dockerfile that copies `.` (most of OpenEnv's) is built from the env folder
    alone, with `BUILD_MODE=standalone`, in a repo's `envs/` too."""
    env = repo / "envs" / "standalone_env"
    env.mkdir()
    (env / "app.txt").write_text("standalone\n")
    (env / "Dockerfile").write_text(
        f"FROM {BASE}\nARG BUILD_MODE=unset\nCOPY . /app/env/\n"
        'RUN echo "$BUILD_MODE" > /app/mode\n'
    )
    built = ensure_env_image(env)
    assert built.source == f"built from {env / 'Dockerfile'}"
    assert run_in(built.image, "cat", "/app/mode") == "standalone\n"
    assert run_in(built.image, "cat", "/app/env/app.txt") == "standalone\n"
