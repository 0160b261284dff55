"""Pixels in an observation: found, measured, and encoded as images for the model.

A top-level observation field is an image when it is one of:

- a flat list of 0..255 ints whose length matches a sibling shape field
  (`<name>_shape`, else `shape`) of H x W or H x W x C (Atari's `screen` and
  `screen_shape`);
- a nested H x W or H x W x C list of 0..255 ints (BrowserGym's `screenshot`);
- a string holding a data URL (`data:image/...;base64,...`) or bare base64 PNG/JPEG.

Pixel lists need both sides at least `MIN_SIDE` and C in 1, 3, 4, so board grids
(Sudoku, Go) and RAM dumps (Atari's 128-value `ram`, shape `[128]`) stay text. Found
pixels are encoded as PNG with Pillow, imported only when an image is found; an image
string is passed on as it is (PNG, JPEG, GIF, WebP) or re-encoded as PNG.

    for image in find_images(observation):
        print(image.field, image.shape_text, len(image.encoded()))
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MIN_SIDE = 32
"""The smallest height and width a pixel list needs to count as an image."""
_MODES = {1: "L", 3: "RGB", 4: "RGBA"}
_PASSED_ON = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif"}
_PASSED_ON["WEBP"] = "image/webp"
_BASE64_MAGIC = ("iVBORw0KGgo", "/9j/")  # PNG, JPEG
PNG_COMPRESS_LEVEL = 6


@dataclass
class FoundImage:
    """One image field of an observation."""

    field: str
    height: int
    width: int
    channels: int
    uses: tuple[str, ...]
    """The observation fields this image stands for (itself and its shape field)."""
    _pixels: bytes | None = None
    _encoded: tuple[bytes, str] | None = field(default=None, repr=False)

    @property
    def shape_text(self) -> str:
        """`210x160x3` (height x width x channels), `64x64` for one channel."""
        sides = f"{self.height}x{self.width}"
        return sides if self.channels == 1 else f"{sides}x{self.channels}"

    def encoded(self) -> bytes:
        """The image file: PNG for pixels, the original file for an image string."""
        return self._file()[0]

    @property
    def mime(self) -> str:
        return self._file()[1]

    def data_url(self) -> str:
        data, mime = self._file()
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"

    def _file(self) -> tuple[bytes, str]:
        if self._encoded is None:
            assert self._pixels is not None
            self._encoded = (
                encode_png(self._pixels, self.width, self.height, self.channels),
                "image/png",
            )
        return self._encoded


def encode_png(pixels: bytes, width: int, height: int, channels: int) -> bytes:
    from PIL import Image

    image = Image.frombytes(_MODES[channels], (width, height), pixels)
    out = io.BytesIO()
    image.save(out, "PNG", compress_level=PNG_COMPRESS_LEVEL)
    return out.getvalue()


def find_images(observation: Mapping[str, Any]) -> list[FoundImage]:
    """The image fields of `observation`, in field order (never `metadata`)."""
    found = []
    for name, value in observation.items():
        if name == "metadata":
            continue
        if isinstance(value, str):
            image = _from_string(name, value)
        elif isinstance(value, list) and value:
            image = _from_flat(name, value, observation) or _from_nested(name, value)
        else:
            image = None
        if image is not None:
            found.append(image)
    return found


def _shape_of(name: str, observation: Mapping[str, Any]) -> tuple[str, list] | None:
    for key in (f"{name}_shape", "shape"):
        shape = observation.get(key)
        if isinstance(shape, list | tuple) and key != name:
            return key, list(shape)
    return None


def _image_sides(height: Any, width: Any, channels: Any) -> bool:
    return (
        all(type(v) is int for v in (height, width, channels))
        and height >= MIN_SIDE
        and width >= MIN_SIDE
        and channels in _MODES
    )


def _from_flat(
    name: str, value: list, observation: Mapping[str, Any]
) -> FoundImage | None:
    if isinstance(value[0], list) or len(value) < MIN_SIDE * MIN_SIDE:
        return None
    found = _shape_of(name, observation)
    if found is None or len(found[1]) not in (2, 3):
        return None
    shape_key, shape = found
    height, width, channels = (shape + [1])[:3]
    if not _image_sides(height, width, channels) or height * width * channels != len(
        value
    ):
        return None
    pixels = _bytes_of(value)
    if pixels is None:
        return None
    return FoundImage(name, height, width, channels, (name, shape_key), pixels)


def _from_nested(name: str, rows: list) -> FoundImage | None:
    first = rows[0]
    if not isinstance(first, list) or not first:
        return None
    height, width = len(rows), len(first)
    channels = len(first[0]) if isinstance(first[0], list) else 1
    if not _image_sides(height, width, channels):
        return None
    parts = []
    for row in rows:
        if not isinstance(row, list) or len(row) != width:
            return None
        flat = row if channels == 1 else _chained(row)
        data = _bytes_of(flat)
        if data is None or len(data) != width * channels:
            return None
        parts.append(data)
    return FoundImage(name, height, width, channels, (name,), b"".join(parts))


def _chained(row: list) -> Any:
    return itertools.chain.from_iterable(row)


def _bytes_of(values: Any) -> bytes | None:
    """The values as bytes when every one is an int in 0..255 (checked in C)."""
    try:
        return bytes(values)
    except (TypeError, ValueError):
        return None


def _from_string(name: str, value: str) -> FoundImage | None:
    if value.startswith("data:image/"):
        header, _, payload = value.partition(",")
        if not header.endswith(";base64"):
            return None
    elif value.startswith(_BASE64_MAGIC):
        payload = value
    else:
        return None
    try:
        data = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None
    return _from_file(name, data)


def _from_file(name: str, data: bytes) -> FoundImage | None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image_format = image.format or ""
            width, height = image.size
            channels = len(image.getbands())
            if image_format not in _PASSED_ON:
                out = io.BytesIO()
                image.save(out, "PNG", compress_level=PNG_COMPRESS_LEVEL)
                data, mime = out.getvalue(), "image/png"
            else:
                mime = _PASSED_ON[image_format]
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    return FoundImage(name, height, width, channels, (name,), _encoded=(data, mime))
