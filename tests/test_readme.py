"""The README's quick start, run as a newcomer runs it: every command of its fenced
`bash` blocks that needs no model key, from the repo root, exactly as written.

Each command must exit 0. A fenced `text` block right after a `bash` block is the
output of that block's first command: each of its lines must appear in the command's
stdout, in order, with `<...>` standing for any text (timings, paths). Commands with
a `<placeholder>` (a model, a key) and `uv run pytest` (this suite) are not run.
"""

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.servers import stop

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SECTION = "## Quick start"
NOT_RUN = ("uv run pytest",)  # this suite
TIMEOUT_S = 600


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    shows: tuple[str, ...]  # output lines the README shows for it

    @property
    def text(self) -> str:
        return shlex.join(self.argv)


def quick_start(readme: str) -> str:
    start = readme.index(f"\n{SECTION}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start : end if end >= 0 else len(readme)]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```$", text, flags=re.M | re.S)


def commands(section: str) -> list[Command]:
    found: list[Command] = []
    blocks = fenced_blocks(section)
    for i, (lang, body) in enumerate(blocks):
        if lang != "bash":
            continue
        following = blocks[i + 1] if i + 1 < len(blocks) else ("", "")
        shows = tuple(following[1].splitlines()) if following[0] == "text" else ()
        lines = body.replace("\\\n", " ").splitlines()
        argvs = [tuple(shlex.split(line, comments=True)) for line in lines]
        for n, argv in enumerate(a for a in argvs if a):
            found.append(Command(argv, shows if n == 0 else ()))
    return found


def runnable(command: Command) -> bool:
    """Needs no model key (no `<placeholder>`) and is not this suite."""
    return not re.search(r"<\w[^>]*>", command.text) and not command.text.startswith(
        NOT_RUN
    )


def shown_line_pattern(line: str) -> re.Pattern[str]:
    parts = re.split(r"<[^>]+>", line.rstrip())
    return re.compile(".+".join(re.escape(part) for part in parts))


QUICK_START = [c for c in commands(quick_start(README.read_text())) if runnable(c)]


def test_the_quick_start_starts_with_the_demo():
    """The parse found the commands (a README reshuffle must not leave this file
    testing nothing), and the demo is the first."""
    assert QUICK_START and QUICK_START[0].text == "uv run openenv-v1 demo"
    assert QUICK_START[0].shows, "the README shows the demo's summary"


@pytest.mark.skipif(
    not version("verifiers").startswith("0.2."),
    reason="the README's `uv run` commands sync the default (verifiers 0.2) "
    "environment; run in the verifiers 0.4 one they would replace it",
)
@pytest.mark.parametrize("command", QUICK_START, ids=lambda c: c.text[:60])
def test_quick_start_command(command: Command):
    proc = subprocess.Popen(
        list(command.argv),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        stop(proc)
    try:
        assert proc.returncode == 0, (
            f"README quick start `{command.text}` exited {proc.returncode}:\n"
            f"{out[-3000:]}\n{err[-3000:]}"
        )
        lines = [line.rstrip() for line in out.splitlines()]
        at = 0
        for shown in command.shows:
            pattern = shown_line_pattern(shown)
            while at < len(lines) and not pattern.fullmatch(lines[at]):
                at += 1
            assert at < len(lines), (
                f"README shows {shown!r} in the output of `{command.text}` (after "
                f"the lines before it), but its output was:\n{out[-3000:]}"
            )
            at += 1
    finally:
        _remove_run_outputs(out)


def _remove_run_outputs(out: str) -> None:
    """The demo writes its run under outputs/ of the repo (gitignored): remove it."""
    for match in re.finditer(r"^\s+traces\s+(\S+traces\.jsonl)$", out, flags=re.M):
        run = Path(match.group(1)).parent
        if run.is_relative_to(ROOT / "outputs") and run != ROOT / "outputs":
            shutil.rmtree(run, ignore_errors=True)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", page.read_text(), flags=re.M | re.S)
    return {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_every_link_of_the_readme_and_docs_resolves():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"\w+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and anchor not in _anchors(linked):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
