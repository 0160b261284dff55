"""The build context of an env folder's Docker build, the files its image is made of,
and the one reader of a Dockerfile's instructions and `ARG`s.

Most env Dockerfiles `COPY .` from the env folder (`BUILD_MODE=standalone`). A few
are built from their repo's root, as their header says (coding_env: `docker build -f
envs/coding_env/server/Dockerfile .`), and copy paths relative to it. So when the
folder is `<root>/envs/<env>` and its Dockerfile copies a path not in the folder but
under `<root>`, the context is `<root>` (`BUILD_MODE=in-repo`), and the image's inputs
are the paths it copies, the Dockerfile and the root's `.dockerignore`.
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
    """The Dockerfile's instructions, comments dropped, continuation lines joined."""
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
    """`(NAME, default)` of an `ARG NAME=default` instruction's `words`, else None."""
    if len(words) >= 2 and words[0].upper() == "ARG" and "=" in words[1]:
        name, _, default = words[1].partition("=")
        return name, default.strip("\"'")
    return None


def copy_sources(dockerfile: Path, build_args: Mapping[str, str]) -> list[str]:
    """The context paths the Dockerfile's `COPY` and `ADD` lines read (not `--from`
    copies nor URLs), build arguments substituted."""
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
            path = expand(path, args)
            if "://" not in path and not path.startswith("git@"):
                sources.append(path)
    return sources


def expand(text: str, args: Mapping[str, str]) -> str:
    """`text` with its `$NAME` and `${NAME}` build arguments substituted."""
    return _VARIABLE.sub(lambda m: args.get(m[1], ""), text)


def _present(base: Path, source: str) -> bool:
    """Whether `source` (a COPY source, maybe a glob) names something under `base`."""
    relative = source.lstrip("/") or "."
    if any(c in relative for c in "*?["):
        return any(base.glob(relative))
    return (base / relative).exists()


def build_context(
    folder: Path, dockerfile: Path, build_args: Mapping[str, str]
) -> BuildContext:
    """The build context for the env `folder` and its `dockerfile`."""
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
