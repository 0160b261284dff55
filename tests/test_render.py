"""What the model is shown: compact turns, schema once, history without repeats."""

import json

from openenv_v1.core.render import (
    ObservationRenderer,
    render_observation,
    render_opening,
)
from openenv_v1.core.schema import ActionSpec

SPEC = ActionSpec(
    {
        "type": "object",
        "properties": {"message": {"type": "string"}},
        "required": ["message"],
    }
)
INTRO = "You are Player 0 in Wordle. Guess the secret word in six tries."
FEEDBACK = "You submitted [crane].\nFeedback: G G X X Y"


def wordle_like(prompt: str, history: list[dict]) -> dict:
    return {
        "prompt": prompt,
        "messages": history,
        "legal_players": [0],
        "info": {},
        "metadata": {"reward_signals": {"greens": 0.4}},
    }


def test_text_format_shows_the_text_field_as_is_and_history_only_once():
    render = ObservationRenderer("text")
    intro = {"id": -1, "content": INTRO, "category": "GAME"}
    first = render(wordle_like(INTRO, [intro]))
    # The history entry only copies the prompt; metadata and empty fields are left out.
    assert first == f"{INTRO}\nlegal_players: [0]"
    guess = {"id": 0, "content": "[crane]", "category": "PLAYER"}
    answer = {"id": -1, "content": FEEDBACK, "category": "GAME"}
    second = render(wordle_like(FEEDBACK, [intro, guess, answer]))
    assert second.splitlines()[:2] == FEEDBACK.splitlines()
    assert INTRO not in second  # shown in the first turn already
    assert f"messages: {json.dumps([guess], separators=(',', ':'))}" in second
    assert "legal_players: [0]" in second  # plain values are always shown
    assert "greens" not in second


def test_text_format_names_fields_when_there_is_no_single_text_field():
    render = ObservationRenderer("text")
    shown = render({"board": "x..", "status": "your move", "score": 3})
    assert shown.splitlines() == ["board: x..", "status: your move", "score: 3"]


def test_json_format_is_the_whole_observation_every_turn():
    render = ObservationRenderer("json")
    observation = wordle_like(INTRO, [{"id": -1, "content": INTRO}])
    assert render(observation) == render(observation) == render_observation(observation)
    assert json.loads(render(observation))["messages"] == [{"id": -1, "content": INTRO}]
    assert "metadata" not in render(observation)


def test_opening_carries_the_action_format_once():
    render = ObservationRenderer("text")
    opening = render_opening(wordle_like(INTRO, []), SPEC, render)
    assert opening.startswith(INTRO)
    assert opening.count("Action schema:") == 1
    assert "Action schema" not in render(wordle_like(FEEDBACK, []))
