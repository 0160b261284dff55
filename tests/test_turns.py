"""Turns the model gets: pixels as images beside a short line, text within a bound."""

import base64
import io
import json

from PIL import Image

from openenv_v1.core.episode.images import find_images
from openenv_v1.core.episode.schema import ActionSpec
from openenv_v1.core.episode.turns import TurnRenderer

SPEC = ActionSpec(
    {
        "type": "object",
        "properties": {"action_id": {"type": "integer"}},
        "required": ["action_id"],
    }
)


def frame(height: int, width: int, channels: int = 3) -> list[int]:
    return [(i * 7) % 256 for i in range(height * width * channels)]


def decoded(image) -> Image.Image:
    return Image.open(io.BytesIO(image.encoded()))


def png_base64(width: int, height: int) -> str:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_a_flat_frame_with_a_shape_field_is_one_png_of_that_size():
    pixels = frame(210, 160)
    observation = {"screen": pixels, "screen_shape": [210, 160, 3], "lives": 3}
    (image,) = find_images(observation)
    assert (image.field, image.shape_text, image.uses) == (
        "screen",
        "210x160x3",
        ("screen", "screen_shape"),
    )
    png = decoded(image)
    assert (png.format, png.size, png.mode) == ("PNG", (160, 210), "RGB")
    # Row-major H x W x C: pixel (x=1, y=0) is values 3..5.
    assert png.getpixel((1, 0)) == tuple(pixels[3:6])


def test_ram_boards_and_floats_stay_text():
    ram = list(range(128))
    assert find_images({"screen": ram, "screen_shape": [128]}) == []
    go_board = [[0, 1, 2] * 6 + [0] for _ in range(19)]
    assert find_images({"board": go_board}) == []
    floats = [0.5] * (64 * 64)
    assert find_images({"x": floats, "x_shape": [64, 64]}) == []
    too_big = frame(40, 40, 1)
    too_big[5] = 300
    assert find_images({"x": too_big, "shape": [40, 40]}) == []
    wrong_length = frame(40, 40, 1)[:-1]
    assert find_images({"x": wrong_length, "x_shape": [40, 40]}) == []


def test_nested_screenshots_and_image_strings_are_found():
    screenshot = [[[x % 256, y % 256, 0] for x in range(48)] for y in range(40)]
    gray = [[(x + y) % 256 for x in range(33)] for y in range(32)]
    url = f"data:image/png;base64,{png_base64(20, 10)}"
    observation = {
        "screenshot": screenshot,
        "gray": gray,
        "bare": png_base64(64, 48),
        "url": url,
        "text": "data:text/plain;base64,aGVsbG8=",
    }
    images = {i.field: i for i in find_images(observation)}
    assert sorted(images) == ["bare", "gray", "screenshot", "url"]
    assert decoded(images["screenshot"]).getpixel((5, 7)) == (5, 7, 0)
    assert decoded(images["gray"]).size == (33, 32)
    assert images["bare"].shape_text == "48x64x3"
    # An image string is passed on as it came.
    assert images["url"].data_url() == url
    assert images["url"].mime == "image/png"
    # ... unless models may not take its format: then it is re-encoded as PNG.
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(out, "BMP")
    bmp = f"data:image/bmp;base64,{base64.b64encode(out.getvalue()).decode()}"
    (image,) = find_images({"frame": bmp})
    assert image.mime == "image/png" and decoded(image).getpixel((0, 0)) == (1, 2, 3)


def test_image_fields_leave_the_text_and_go_as_images():
    turns = TurnRenderer()
    observation = {
        "screen": frame(210, 160),
        "screen_shape": [210, 160, 3],
        "legal_actions": [0, 1, 2, 3],
        "lives": 3,
    }
    turn = turns.opening(observation, SPEC)
    assert [i.field for i in turn.images] == ["screen"]
    lines = turn.text.splitlines()
    assert lines[:3] == [
        "legal_actions: [0,1,2,3]",
        "lives: 3",
        "screen: image 210x160x3, attached",
    ]
    assert turn.text.count("Action schema:") == 1
    assert len(turn.text) < 1_000 and turn.cuts == []
    later = turns.observation(observation)
    assert "Action schema" not in later.text and len(later.images) == 1
    # As chat content: the text, then the frame as a data-URL PNG part.
    text_part, image_part = later.chat_content()
    assert text_part == {"type": "text", "text": later.text}
    url = image_part["image_url"]["url"]
    assert image_part["type"] == "image_url" and url.startswith(
        "data:image/png;base64,"
    )
    png = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert png.size == (160, 210)
    assert turns.observation({"lives": 2}).chat_content() == "lives: 2"


def test_images_off_leaves_a_note_and_sends_none():
    turns = TurnRenderer(images=False)
    turn = turns.observation({"screen": frame(210, 160), "screen_shape": [210, 160, 3]})
    assert turn.text == "screen: image 210x160x3, not shown"
    assert turn.images == [] and [i.field for i in turn.omitted] == ["screen"]


def test_fields_over_the_bound_are_cut_longest_first_with_notes():
    turns = TurnRenderer(max_chars=2_000)
    html = "<div>" + "x" * 50_000 + "</div>"
    tree = "[1] RootWebArea\n" * 3_000
    observation = {"goal": "Buy a red shirt.", "pruned_html": html, "axtree_txt": tree}
    turn = turns.observation(observation)
    assert len(turn.text) <= 2_000
    assert turn.text.startswith("goal: Buy a red shirt.")  # short fields stay whole
    cuts = {c.field: c for c in turn.cuts}
    assert sorted(cuts) == ["axtree_txt", "pruned_html"]
    assert cuts["pruned_html"].total == len("pruned_html: ") + len(html)
    for cut in cuts.values():
        assert cut.note in turn.text
        assert (
            f"{cut.total - cut.shown:,} of {cut.total:,} chars of {cut.field} cut"
            in (turn.text)
        )
    # The two long fields share what is left about equally.
    assert abs(cuts["pruned_html"].shown - cuts["axtree_txt"].shown) < 100


def test_the_opening_keeps_the_whole_action_format_within_the_bound():
    turns = TurnRenderer(max_chars=1_500)
    turn = turns.opening({"prompt": "Play.", "log": "y" * 10_000}, SPEC)
    assert len(turn.text) <= 1_500
    assert turn.text.endswith(turns.opening({}, SPEC).text)


def test_json_format_is_bounded_too():
    turns = TurnRenderer("json", max_chars=1_000)
    turn = turns.observation({"a": 1, "html": "z" * 5_000})
    assert len(turn.text) <= 1_000
    assert turn.text.startswith('{"a":1,"html":"zzz')
    assert [c.field for c in turn.cuts] == ["html"]
    small = turns.observation({"a": 1, "b": "c"})
    assert json.loads(small.text) == {"a": 1, "b": "c"}


def test_a_long_invalid_action_problem_is_cut_to_fit():
    turns = TurnRenderer(max_chars=1_000)
    turn = turns.invalid("bad value " + "q" * 5_000, SPEC, left=2)
    assert len(turn.text) <= 1_000
    assert "Action schema:" in turn.text and "chars cut]" in turn.text
