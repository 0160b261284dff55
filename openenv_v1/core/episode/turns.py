"""User turns: an observation as bounded text plus its pixels as images.

`TurnRenderer` wraps the text renderer (`render.py`) with two rules (docs/observations.md):

- image fields leave the text, each as one line (`screen: image 210x160x3,
  attached`); a turn sends at most `MAX_IMAGES_PER_TURN` images of at most
  `MAX_IMAGE_BYTES` each (larger ones downscaled), and names what it did not send;
- no turn's text is longer than `max_chars`: the longest fields are cut to an equal
  share of what is left, keeping head and tail around a note (an output's tail gets
  two thirds, since a terminal's errors come last); a text that copies another field
  is named, not resent. The action format is never cut.

    turns = TurnRenderer(images=True, max_chars=8_000)
    opening = turns.opening(reset_observation, spec)  # .text, .images, .cuts
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openenv_v1.core.episode.action_format import (
    render_action_format,
    render_invalid,
    render_invalid_call,
    render_tool_hint,
)
from openenv_v1.core.episode.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES_PER_TURN,
    FoundImage,
    find_images,
    within_bytes,
)
from openenv_v1.core.episode.render import (
    ObservationFormat,
    ObservationRenderer,
    same_texts,
)
from openenv_v1.core.episode.report import MAX_OBSERVATION_CHARS
from openenv_v1.core.episode.schema import ActionSpec
from openenv_v1.core.episode.view import compact, visible

MIN_OBSERVATION_CHARS = 500
"""What an observation keeps even when the action format leaves less of the bound
(then, and only then, the opening turn is longer than the bound)."""


@dataclass(frozen=True)
class Cut:
    """A field shortened to fit the bound: `shown` of its `total` characters."""

    field: str
    shown: int
    total: int

    @property
    def note(self) -> str:
        return _note(self.field, self.total - self.shown, self.total)


@dataclass
class Turn:
    """One user turn: its text, the images sent with it, and what was left out."""

    text: str
    images: list[FoundImage] = field(default_factory=list)
    omitted: list[FoundImage] = field(default_factory=list)
    """Images found but not sent (`images` off, refused, or past the bounds)."""
    cuts: list[Cut] = field(default_factory=list)
    failed: bool = False
    """It answers a call that was not carried out as asked: an invalid action, a tool
    error, the episode already over (a native tool result marks it as an error)."""

    def chat_content(self) -> str | list[dict[str, Any]]:
        """The turn as OpenAI chat message content: its text alone, or its text and
        then its images as data-URL `image_url` parts."""
        if not self.images:
            return self.text
        return [
            {"type": "text", "text": self.text},
            *(
                {"type": "image_url", "image_url": {"url": image.data_url()}}
                for image in self.images
            ),
        ]


def _note(name: str, cut: int, total: int) -> str:
    return f" [... {cut:,} of {total:,} chars of {name} cut ...]"


def fit(pieces: list[tuple[str, str]], budget: int) -> tuple[list[str], list[Cut]]:
    """The pieces' texts, the longest cut so that all of them, one separator apart,
    take at most `budget` characters."""
    sizes = [len(text) for _, text in pieces]
    room = budget - max(0, len(pieces) - 1)
    if sum(sizes) <= room:
        return [text for _, text in pieces], []
    # The note, and the space before the kept tail.
    reserve = 1 + max(len(_note(name, len(text), len(text))) for name, text in pieces)
    caps = _water_fill(sizes, room, reserve)
    texts, cuts = [], []
    for index, (name, text) in enumerate(pieces):
        cap = caps.get(index)
        if cap is None:
            texts.append(text)
            continue
        cut = Cut(name, cap, len(text))
        head = cap - _tail_share(name, cap)
        tail = text[len(text) - (cap - head) :] if cap > head else ""
        texts.append(text[:head] + cut.note + (" " + tail if tail else ""))
        cuts.append(cut)
    return texts, cuts


# Fields whose end matters most: a terminal's errors and test summary come last.
_OUTPUT_NAMES = ("output", "stdout", "stderr", "log", "terminal", "result", "trace")


def _tail_share(name: str, cap: int) -> int:
    """How much of a cut field's `cap` characters come from its end: two thirds for
    outputs (`stdout`, `output`, ...), a third for anything else."""
    lowered = (name or "").lower()
    if any(word in lowered for word in _OUTPUT_NAMES):
        return (2 * cap) // 3
    return cap // 3


def _water_fill(sizes: list[int], room: int, reserve: int) -> dict[int, int]:
    """Index -> length for the pieces to cut: every piece that does not fit an equal
    share of what the shorter ones leave gets that share (less its note's `reserve`)."""
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    remaining = room
    for position, index in enumerate(order):
        left = len(order) - position
        share = remaining // left
        if sizes[index] <= share:
            remaining -= sizes[index]
            continue
        cap = max(0, share - reserve)
        return {i: min(cap, sizes[i]) for i in order[position:]}
    return {}


class TurnRenderer:
    """Renders one episode's turns; keeps the text renderer's memory of what the
    model has seen (history entries are shown once)."""

    def __init__(
        self,
        format: ObservationFormat = "text",
        images: bool = True,
        max_chars: int = MAX_OBSERVATION_CHARS,
    ) -> None:
        self.text = ObservationRenderer(format)
        self.images = images
        self.max_chars = max_chars

    def observation(self, observation: dict[str, Any], reserve: int = 0) -> Turn:
        """The observation as a turn whose text takes at most `max_chars - reserve`."""
        found = find_images(observation)
        used = {name for image in found for name in image.uses}
        rest = {k: v for k, v in observation.items() if k not in used}
        sent, omitted, image_lines = self._bounded(found)
        limit = max(self.max_chars - reserve, MIN_OBSERVATION_CHARS)
        budget = limit - sum(len(line) + 1 for line in image_lines)
        if self.text.format == "json":
            texts, cuts = fit(self._pieces(rest), budget - 2)
            texts = ["{" + ",".join(texts) + "}"]
        else:
            texts, cuts = fit(self._pieces(rest), budget)
        text = "\n".join(texts + image_lines)
        if len(text) > limit:
            # Only when the bound is too small for the notes themselves.
            text = self.clip(text, limit)
        return Turn(text, images=sent, omitted=omitted, cuts=cuts)

    def _bounded(
        self, found: list[FoundImage]
    ) -> tuple[list[FoundImage], list[FoundImage], list[str]]:
        """The images to send, those not sent, and one line per image saying which
        (and why not, or how it was downscaled)."""
        sent: list[FoundImage] = []
        omitted: list[FoundImage] = []
        lines: list[str] = []
        limit = f"{MAX_IMAGE_BYTES / 2**20:g} MiB"
        for image in found:
            head = f"{image.field}: image {image.shape_text}"
            if image.refused or not self.images or len(sent) >= MAX_IMAGES_PER_TURN:
                if image.refused:
                    why = f"refused: {image.refused}"
                elif not self.images:
                    why = "not shown"
                else:
                    why = f"not attached (a turn carries at most {MAX_IMAGES_PER_TURN})"
                lines.append(f"{head}, {why}")
                omitted.append(image)
                continue
            fitted = within_bytes(image, MAX_IMAGE_BYTES)
            if fitted is None:
                lines.append(f"{head}, not attached (over {limit} even downscaled)")
                omitted.append(image)
            elif fitted is image:
                lines.append(f"{head}, attached")
                sent.append(image)
            else:
                lines.append(
                    f"{head}, attached, downscaled to {fitted.shape_text} to fit {limit}"
                )
                sent.append(fitted)
        return sent, omitted, lines

    def _pieces(self, observation: dict[str, Any]) -> list[tuple[str, str]]:
        if self.text.format == "json":
            fields = visible(observation)
            copies = same_texts(fields)
            return [
                (
                    k,
                    f"{compact(k)}:{compact(f'(same as {copies[k]})' if k in copies else v)}",
                )
                for k, v in fields.items()
            ]
        return self.text.pieces(observation)

    def opening(
        self, observation: dict[str, Any], spec: ActionSpec, native: bool = False
    ) -> Turn:
        """The reset observation, then the action format (once per episode); with
        native tool calling, a hint to call the tools instead."""
        action_format = render_tool_hint(spec) if native else render_action_format(spec)
        turn = self.observation(observation, reserve=len(action_format) + 2)
        turn.text = (
            f"{turn.text}\n\n{action_format}" if turn.text.strip() else action_format
        )
        return turn

    def invalid(self, problem: str, spec: ActionSpec, left: int) -> Turn:
        """Feedback on an invalid action; a long problem (it may quote the reply) is
        cut to fit."""
        text = render_invalid(problem, spec, left)
        over = len(text) - self.max_chars
        if over > 0 and over < len(problem):
            text = render_invalid(self.clip(problem, len(problem) - over), spec, left)
        return Turn(text)

    def invalid_call(self, problem: str, left: int) -> Turn:
        """Feedback on an invalid native tool call, cut to the bound."""
        return Turn(
            self.clip(render_invalid_call(problem, left), self.max_chars), failed=True
        )

    def message(self, text: str) -> Turn:
        """A plain message (episode over, env failure), clipped to the bound."""
        return Turn(self.clip(text, self.max_chars))

    @staticmethod
    def clip(text: str, limit: int) -> str:
        if len(text) <= limit:
            return text
        kept = max(0, limit - len(f" [... {len(text):,} more chars cut]"))
        return text[:kept] + f" [... {len(text) - kept:,} more chars cut]"
