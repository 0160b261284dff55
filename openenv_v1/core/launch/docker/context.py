"""The build context of an env folder's Docker build, and the files its image is made of.

OpenEnv's `openenv build` tells two kinds of env folder apart: one in a repo's `envs/`
folder (`<root>/envs/<env>`, "in-repo") and any other ("standalone"), and passes the
kind as the build argument `BUILD_MODE`. Most env Dockerfiles `COPY .` and build from
the env folder alone. A few are written to be built from the repo root, as their own
header says (coding_env: `docker build -f envs/coding_env/server/Dockerfile .`), and
copy paths relative to it (`COPY envs/coding_env/ ...`, `COPY src/openenv/core/ ...`).
So `build_context(folder, dockerfile)` picks:

- the env folder, `BUILD_MODE=standalone`; unless
- the folder is `<root>/envs/<env>` and its Dockerfile copies a path that is not in the
  folder but is under `<root>`: then `<root>`, `BUILD_MODE=in-repo`.

The image's inputs (what its tag hashes) are the context's files: the whole env folder,
or, for a repo root, the paths the Dockerfile copies, the Dockerfile itself and the
root's `.dockerignore`; never the rest of the repo.

    context = build_context(Path("OpenEnv/envs/coding_env"), dockerfile)
    context.root, context.mode   # (Path("OpenEnv"), "in-repo")

`arg_default` reads an `ARG` instruction, for this module and `image.base_images`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_COPY = re.compile(r"^\s*(COPY|ADD)\s+(.*)$", re.I | re.S)
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")


@dataclass(frozen=True)
class BuildContext:
    root: Path
    """The folder sent to `docker build` as its context."""
    mode: str
    """`standalone` (the env folder) or `in-repo` (the repo root holding `envs/`)."""
    inputs: tuple[str, ...]
    """Paths under `root` whose files make up the image (`.` for all of it)."""


def dockerfile_lines(dockerfile: Path) -> list[str]:
    """The Dockerfile's instructions, one string each: comments dropped, continuation
    lines (ending in a backslash) joined."""
    lines: list[str] = []
    pending = ""
    for raw in dockerfile.read_text(errors="replace").splitlines():
        if raw.lstrip().startswith("#") and not pending:
            continue
        stripped = raw.rstrip()
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    return [line for line in lines if line.strip()]


def arg_default(words: Sequence[str]) -> tuple[str, str] | None:
    """The build argument an `ARG NAME=default` instruction (split into `words`)
    declares, and its default unquoted; None for any other instruction, or an `ARG`
    without a default."""
    if len(words) >= 2 and words[0].upper() == "ARG" and "=" in words[1]:
        name, _, default = words[1].partition("=")
        return name, default.strip("\"'")
    return None


def copy_sources(dockerfile: Path, build_args: Mapping[str, str]) -> list[str]:
    """The context paths the Dockerfile's `COPY` and `ADD` lines read (`--from` copies,
    which read another stage, and URLs left out), with build arguments substituted."""
    args = dict(build_args)
    sources: list[str] = []
    for line in dockerfile_lines(dockerfile):
        if arg := arg_default(line.split()):
            args.setdefault(*arg)
            continue
        found = _COPY.match(line)
        if not found:
            continue
        rest = found[2].strip()
        flags = re.findall(r"--\S+", rest.split("[", 1)[0])
        if any(flag.startswith("--from") for flag in flags):
            continue
        rest = re.sub(r"^(--\S+\s+)*", "", rest)
        if rest.startswith("["):
            try:
                paths = [str(p) for p in json.loads(rest)]
            except ValueError:
                continue
        else:
            paths = rest.split()
        for path in paths[:-1]:
            path = _VARIABLE.sub(lambda m: args.get(m[1], ""), path)
            if "://" not in path and not path.startswith("git@"):
                sources.append(path)
    return sources


def _present(base: Path, source: str) -> bool:
    """Whether `source` (a COPY source, maybe a glob) names something under `base`."""
    relative = source.lstrip("/") or "."
    if any(c in relative for c in "*?["):
        return any(base.glob(relative))
    return (base / relative).exists()


def build_context(
    folder: Path, dockerfile: Path, build_args: Mapping[str, str]
) -> BuildContext:
    """The build context for the env `folder` and its `dockerfile` (see the module
    docstring)."""
    root = folder.parent.parent
    sources = copy_sources(dockerfile, build_args)
    outside = [s for s in sources if not _present(folder, s)]
    if (
        folder.parent.name == "envs"
        and outside
        and any(_present(root, s) for s in outside)
    ):
        inputs = {s.lstrip("/") or "." for s in sources}
        inputs.add(dockerfile.relative_to(root).as_posix())
        if (root / ".dockerignore").is_file():
            inputs.add(".dockerignore")
        return BuildContext(root, "in-repo", tuple(sorted(inputs)))
    return BuildContext(folder, "standalone", (".",))
