"""Pixels in an observation: found, measured, and encoded as images for the model.

A top-level field is an image when it is a flat list of 0..255 ints matching a
sibling shape field (`<name>_shape`, else `shape`) of H x W (x C), a nested H x W (x
C) list of them, or a data URL / bare base64 PNG or JPEG string. Both sides at least
`MIN_SIDE` and C in 1, 3, 4, so board grids and RAM dumps stay text. Pixels are
encoded as PNG (Pillow, imported only when an image is found).

The server is untrusted: an image over `MAX_IMAGE_PIXELS` is refused from its header,
before anything is decoded (a decompression bomb never is), and `within_bytes`
downscales a file over a byte bound until it fits.
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
import math
import warnings
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
MAX_IMAGE_PIXELS = 25_000_000
"""The most pixels (height x width) an image may have; larger ones are refused."""
MAX_IMAGE_BYTES = 2 * 1024 * 1024
"""The largest image file a turn sends; larger ones are downscaled to fit."""
MAX_IMAGES_PER_TURN = 8
"""The most images one turn sends; the rest are named in its text, not sent."""


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
    refused: str | None = None
    """Why the image is not sent at all (too many pixels); None for a usable one."""

    @property
    def shape_text(self) -> str:
        """`210x160x3` (height x width x channels), `64x64` for one channel; `?`
        when not even that could be read."""
        if not self.height:
            return "?"
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
            from PIL import Image

            assert self._pixels is not None
            size = (self.width, self.height)
            pixels = Image.frombytes(_MODES[self.channels], size, self._pixels)
            self._encoded = (_saved(pixels), "image/png")
        return self._encoded


def _saved(image: Any, jpeg: bool = False) -> bytes:
    """A Pillow image's file: PNG, or JPEG (quality 85)."""
    out = io.BytesIO()
    if jpeg:
        image.save(out, "JPEG", quality=85)
    else:
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


def _oversized(
    name: str, height: int, width: int, channels: int, uses: tuple[str, ...]
) -> FoundImage | None:
    """The image refused, when it has more than `MAX_IMAGE_PIXELS` pixels."""
    pixels = height * width
    if pixels <= MAX_IMAGE_PIXELS:
        return None
    refused = f"{pixels:,} pixels is over the {MAX_IMAGE_PIXELS:,}-pixel bound"
    return FoundImage(name, height, width, channels, uses, refused=refused)


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
    uses = (name, shape_key)
    if oversized := _oversized(name, height, width, channels, uses):
        return oversized
    pixels = _bytes_of(value)
    if pixels is None:
        return None
    return FoundImage(name, height, width, channels, uses, pixels)


def _from_nested(name: str, rows: list) -> FoundImage | None:
    first = rows[0]
    if not isinstance(first, list) or not first:
        return None
    height, width = len(rows), len(first)
    channels = len(first[0]) if isinstance(first[0], list) else 1
    if not _image_sides(height, width, channels):
        return None
    if oversized := _oversized(name, height, width, channels, (name,)):
        return oversized
    parts = []
    for row in rows:
        if not isinstance(row, list) or len(row) != width:
            return None
        flat = row if channels == 1 else itertools.chain.from_iterable(row)
        data = _bytes_of(flat)
        if data is None or len(data) != width * channels:
            return None
        parts.append(data)
    return FoundImage(name, height, width, channels, (name,), b"".join(parts))


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
        # Pillow warns (and past twice its own bound, raises) on opening a huge
        # image; the header's size is checked against ours before any decoding.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        return FoundImage(name, 0, 0, 1, (name,), refused=f"a decompression bomb ({e})")
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    try:
        with image:
            image_format = image.format or ""
            width, height = image.size
            channels = len(image.getbands())
            if oversized := _oversized(name, height, width, channels, (name,)):
                return oversized
            if image_format not in _PASSED_ON:
                data, mime = _saved(image), "image/png"
            else:
                mime = _PASSED_ON[image_format]
    except (UnidentifiedImageError, OSError, ValueError):
        return None
    return FoundImage(name, height, width, channels, (name,), _encoded=(data, mime))


def within_bytes(image: FoundImage, max_bytes: int) -> FoundImage | None:
    """`image` when its file takes at most `max_bytes`; else a copy downscaled until
    it does (a JPEG stays JPEG, anything else becomes PNG), or None when a few tries
    do not get there."""
    data = image.encoded()
    if len(data) <= max_bytes:
        return image
    from PIL import Image

    jpeg = image.mime == "image/jpeg"
    with Image.open(io.BytesIO(data)) as source:
        picture = source.convert("RGB") if jpeg and source.mode != "RGB" else source
        width, height = picture.size
        for _ in range(4):
            # File size goes roughly with the pixel count.
            scale = math.sqrt(max_bytes / len(data)) * 0.9
            width, height = max(1, int(width * scale)), max(1, int(height * scale))
            smaller = picture.resize((width, height), Image.Resampling.LANCZOS)
            data = _saved(smaller, jpeg)
            if len(data) <= max_bytes:
                mime = "image/jpeg" if jpeg else "image/png"
                return FoundImage(
                    image.field,
                    height,
                    width,
                    image.channels,
                    image.uses,
                    _encoded=(data, mime),
                )
    return None
