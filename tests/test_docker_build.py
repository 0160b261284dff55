"""Images built from env folders with a real engine: the build context is picked as
OpenEnv's `openenv build` tells an in-repo env from a standalone one, and the inputs
the tag hashes are the files the image is made of; a new build removes the env's
old images.

The env layouts are written here, under names no other test uses (`inrepo_env`), and
their images removed at the end."""

from __future__ import annotations

import pytest

from openenv_v1.core.launch.docker.build import build_args_of
from openenv_v1.core.launch.docker.container import DockerLaunch
from openenv_v1.core.launch.docker.context import build_context
from openenv_v1.core.launch.docker.image import ensure_env_image
from openenv_v1.core.launch.docker.options import DockerOptions
from tests import docker_engine

BASE = "ghcr.io/meta-pytorch/openenv-base:latest"
BASE_NOW = "ghcr.io/huggingface/openenv-base:latest"
"""The base's name in today's OpenEnv (huggingface/OpenEnv)."""
# One worker: the `repo` fixture of each test removes the images of both its envs.
pytestmark = pytest.mark.xdist_group("docker_build")


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
    alone, with `BUILD_MODE=standalone`, in a repo's `envs/` too; FROM the base's
    name in today's OpenEnv."""
    env = repo / "envs" / "standalone_env"
    env.mkdir()
    (env / "app.txt").write_text("standalone\n")
    (env / "Dockerfile").write_text(
        f"FROM {BASE_NOW}\nARG BUILD_MODE=unset\nCOPY . /app/env/\n"
        'RUN echo "$BUILD_MODE" > /app/mode\n'
    )
    built = ensure_env_image(env)
    assert built.source == f"built from {env / 'Dockerfile'}"
    assert run_in(built.image, "cat", "/app/mode") == "standalone\n"
    assert run_in(built.image, "cat", "/app/env/app.txt") == "standalone\n"


def tags_of(repository: str) -> set[str]:
    listed = docker_engine.docker(
        "images", "--format", "{{.Repository}}:{{.Tag}}", repository
    )
    return set(listed.stdout.split())


def test_a_new_build_removes_old_images_but_the_newest_and_those_in_use(
    real_docker, tmp_path
):
    """`keep_images` 2: each edit of the folder builds an image through a real launch;
    the older ones go, except one a running container uses, which goes once that
    container is gone."""
    folder = tmp_path / "prune_env"
    folder.mkdir()
    (folder / "Dockerfile").write_text(
        f'FROM {BASE}\nCOPY . /app/env/\nCMD ["sleep", "300"]\n'
    )
    options = DockerOptions(project_path=str(folder), keep_images=2)
    built: list[str] = []
    first = None

    def launch(version: int) -> DockerLaunch:
        (folder / "version.txt").write_text(f"{version}\n")
        provider = DockerLaunch(env="test/prune_env", options=options)
        provider.start()
        assert provider.image is not None and not provider.image.reused
        built.append(provider.image.image)
        return provider

    try:
        first = launch(1)  # its container keeps running
        for version in (2, 3, 4):
            launch(version).stop(grace_s=0)
        # v2 went; v1 stays, as its container runs.
        assert tags_of("openenv-v1/prune_env") == {built[0], built[2], built[3]}
        first.stop(grace_s=0)
        launch(5).stop(grace_s=0)
        assert tags_of("openenv-v1/prune_env") == {built[3], built[4]}
    finally:
        if first is not None:
            first.stop(grace_s=0)
        remove_images("openenv-v1/prune_env")


def test_the_context_follows_what_the_dockerfile_copies(tmp_path):
    """Which COPY and ADD lines count: the JSON form, build arguments (`ENV_NAME` as
    `openenv build` passes it), continuation lines; not `--from` copies (another
    stage) or URLs."""
    root = tmp_path / "repo"
    env = root / "envs" / "json_env"
    env.mkdir(parents=True)
    (root / "src" / "core").mkdir(parents=True)
    dockerfile = env / "Dockerfile"
    build_args = build_args_of(env)

    def context_of(text: str):
        dockerfile.write_text(f"FROM {BASE} AS builder\n{text}")
        return build_context(env, dockerfile, build_args)

    # From the env folder alone: `--from` and URL sources are not the context's.
    alone = context_of(
        "COPY --from=builder /src/core /app/core\n"
        "ADD https://example.com/x.tgz /tmp/\n"
        "COPY . /app/env\n"
    )
    assert (alone.root, alone.mode, alone.inputs) == (env, "standalone", (".",))
    # From the repo root: a JSON-form copy and one through a build argument.
    rooted = context_of(
        'COPY ["src/core/", "/app/src/core/"]\n'
        "ARG ENV_NAME=unset\n"
        "COPY --chown=root \\\n  envs/${ENV_NAME}_env/ /app/env/\n"
    )
    assert (rooted.root, rooted.mode) == (root, "in-repo")
    assert rooted.inputs == ("envs/json_env/", "envs/json_env/Dockerfile", "src/core/")
    # A source found in neither place leaves the env folder as the context (the build
    # then fails naming the missing path).
    missing = context_of("COPY nowhere/ /app/\n")
    assert (missing.root, missing.mode) == (env, "standalone")
