"""The presenter's story of one complaint (core.analysis.story): the moved words, the heads
ranked by attention mass (against a hand computation), the rewrite chosen; and presenter mode
on the Explain and Attention lab pages (ui.presenter), which hides nothing that matters."""

from __future__ import annotations

import json
from pathlib import Path

import altair as alt
import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.analysis.explain import AttentionMaps, explain_text
from core.analysis.perturbations import ARGUMENT_SWAP, SHUFFLE, TYPO, Perturbation
from core.analysis.probe_compare import DEMO_TEXT, ProbeOutcome, ProbeResult, run_probes
from core.analysis.story import (
    build_story,
    moved_words,
    pick_blind_spot,
    rank_heads,
    token_positions,
)
from core.charts.presenter import LABEL_PX, PRESENTER_SCALE, with_large_text
from core.models.classifier import Prediction
from core.models.registry import load_model
from core.text import word_spans
from tests.helpers import open_page
from ui.presenter import PRESENTER_CSS
from ui.state import ACTIVE_MODEL

ROOT = Path(__file__).resolve().parent.parent
DESKS = ["Card Fraud", "UPI Dispute"]


def test_moved_words_are_the_ones_that_changed_place():
    original = "I paid by card, not by UPI, and was charged twice."
    swapped = "I paid by UPI, not by card, and was charged twice."
    assert moved_words(original, swapped) == (3, 6)  # "card" and "UPI"
    assert moved_words(original, original) == ()


def test_token_positions_follow_the_character_offsets():
    text = "paid by card not upi"
    words = word_spans(text)
    # [CLS] paid by ca ##rd not up ##i [SEP]: word pieces of "card" and "upi"
    offsets = [(0, 0), (0, 4), (5, 7), (8, 10), (10, 12), (13, 16), (17, 19), (19, 20), (0, 0)]
    assert token_positions(offsets, words, (2, 4)) == (3, 4, 6, 7)


def test_heads_are_ranked_by_attention_mass_onto_the_order_words():
    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 4, 4)).astype(np.float32)
    weights /= weights.sum(axis=-1, keepdims=True)  # rows sum to 1, like attention
    maps = AttentionMaps(("a", "b", "c", "d"), weights, has_cls=False)
    positions = (1, 3)
    by_hand = {}
    for layer in range(2):
        for head in range(3):
            rows = [weights[layer, head, q, 1] + weights[layer, head, q, 3] for q in range(4)]
            by_hand[(layer, head)] = sum(rows) / 4
    expected = sorted(by_hand, key=lambda lh: -by_hand[lh])[:3]
    ranked = rank_heads(maps, positions)
    assert [(f.layer, f.head) for f in ranked] == expected
    for focus in ranked:
        assert focus.mass == pytest.approx(by_hand[(focus.layer, focus.head)], abs=1e-6)
    assert rank_heads(maps, ()) == ()


def _prediction(p_card: float) -> Prediction:
    return Prediction.of(DESKS, np.array([p_card, 1 - p_card]))


def _outcome(kind: str, bag: bool, bow: float, neural: float) -> ProbeOutcome:
    t, b = _prediction(neural), _prediction(bow)
    return ProbeOutcome(
        perturbation=Perturbation(kind, f"{kind} text", bag, ""),
        neural=t, bow=b, neural_shift=0.0, bow_shift=0.0,
        neural_jsd=abs(neural - 0.8), bow_jsd=0.0,
        neural_flipped=t.label != "Card Fraud", bow_flipped=b.label != "Card Fraud",
    )  # fmt: skip


def test_the_blind_spot_is_an_order_rewrite_the_bag_of_words_cannot_see():
    moved_bow = _outcome(ARGUMENT_SWAP, True, 0.5, 0.2)  # the bag of words moved: not blind
    typo = _outcome(TYPO, False, 0.6, 0.1)  # changes the bag
    shuffle = _outcome(SHUFFLE, True, 0.6, 0.3)  # flips the transformer
    swap = _outcome(ARGUMENT_SWAP, True, 0.6, 0.7)  # moves it without a flip
    still = _outcome(ARGUMENT_SWAP, True, 0.6, 0.8)  # moves nothing
    probe = ProbeResult("text", _prediction(0.8), _prediction(0.6),
                        (moved_bow, typo, swap, still, shuffle))  # fmt: skip
    assert pick_blind_spot(probe) is shuffle  # a flip first
    no_flip = ProbeResult("text", probe.neural, probe.bow, (moved_bow, typo, swap, still))
    assert pick_blind_spot(no_flip) is swap
    assert pick_blind_spot(ProbeResult("t", probe.neural, probe.bow, (still,))) is None


@pytest.fixture(scope="module")
def tiny_story_parts(tiny_model_dir):
    model = load_model(str(tiny_model_dir))
    expl = explain_text(model.neural, model.bow, DEMO_TEXT)
    probe = run_probes(model.neural, model.bow, DEMO_TEXT)
    return model, expl, probe


def test_story_of_the_demo_complaint_follows_card_and_upi(tiny_story_parts):
    _, expl, probe = tiny_story_parts
    story = build_story(expl, probe)
    spot = story.blind_spot
    assert spot is not None and spot.outcome.perturbation.kind == ARGUMENT_SWAP
    assert spot.outcome.bow.probabilities == probe.bow.probabilities  # blind, exactly
    assert story.order_words == ("card", "UPI")
    tokens = [expl.attention.tokens[t] for t in story.order_tokens]
    assert tokens == ["card", "upi"]  # the tiny model reads words
    weights = expl.attention.weights
    columns = list(story.order_tokens)
    mass = weights[:, :, :, columns].sum(axis=-1).mean(axis=-1)  # (layers, heads)
    best = sorted(np.ndindex(mass.shape), key=lambda lh: -mass[lh])[:3]
    assert [(f.layer, f.head) for f in story.heads] == best
    assert [f.mass for f in story.heads] == sorted((f.mass for f in story.heads), reverse=True)


def test_a_story_without_a_blind_spot_says_why(tiny_story_parts):
    _, expl, probe = tiny_story_parts
    bare = ProbeResult(probe.text, probe.neural, probe.bow, ())
    story = build_story(expl, bare)
    assert story.blind_spot is None and story.heads == () and "No reordering" in story.note


# --------------------------------------------------------------------------- the pages


def _open(page: str, model: Path, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / page), default_timeout=120)
    at.session_state[ACTIVE_MODEL] = str(model)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, at.exception
    return at


def _styled(at: AppTest) -> bool:
    return any(html.value == PRESENTER_CSS for html in at.get("html"))


def test_explain_offers_every_picture_and_no_presenter_by_default(tiny_model_dir):
    at = _open("explain.py", tiny_model_dir)
    keys = {button.key for button in at.button}
    for name in ("strip", "all", "grid"):
        assert f"explain.figure.{name}.prepare" in keys
    assert not at.toggle(key="explain.presenter").value and not _styled(at)
    assert "The story of one complaint" not in [h.value for h in at.header]
    # the other charts are built when their expander or tab is opened, each with its pictures
    opened = (("explain.bars", True), ("explain.attention", "One head"),
              ("explain.attention", "Rollout"), ("explain.attention", "Every head"))  # fmt: skip
    for (state, value), name in zip(opened, ("bars", "head", "rollout", "grid"), strict=True):
        at.session_state[state] = value
        at.run()
        assert f"explain.figure.{name}.prepare" in {button.key for button in at.button}
    at.button(key="explain.figure.grid.prepare").click().run()
    assert not at.exception
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels[:1] == ["Download the explanation (HTML)"]
    assert labels[1:] == ["Download PNG", "Download SVG"]


def test_presenter_mode_tells_the_story_and_keeps_the_details(tiny_model_dir):
    at = _open("explain.py", tiny_model_dir, present="1")
    assert at.toggle(key="explain.presenter").value and _styled(at)
    assert "The story of one complaint" in [h.value for h in at.header]
    steps = [h.value for h in at.subheader]
    story = [s for s in steps if s[:1] in "123"]
    assert [s[0] for s in story] == ["1", "2", "3"]
    assert "Word by word" in steps and "Attention" in steps  # the details are all still there
    assert "explain.figure.grid.prepare" in {b.key for b in at.button}
    assert {"explain.story.head1.prepare", "explain.story.head3.prepare"} <= {
        b.key for b in at.button
    }
    assert _chart_label_sizes(at) == {LABEL_PX * PRESENTER_SCALE}  # every chart, larger text
    at.toggle(key="explain.presenter").set_value(False).run()
    assert not at.exception and not _styled(at) and "present" not in at.query_params
    assert _chart_label_sizes(at) == {None}  # Vega-Lite's own sizes again


def _chart_label_sizes(at: AppTest) -> set:
    """The axis label size each chart of the page configures (None: Vega-Lite's default)."""
    specs = [json.loads(chart.proto.spec) for chart in at.get("vega_lite_chart")]
    assert specs
    return {spec.get("config", {}).get("axis", {}).get("labelFontSize") for spec in specs}


def test_large_text_changes_only_the_text_sizes():
    chart = alt.Chart(pd.DataFrame({"desk": ["a", "b"], "n": [1, 2]})).mark_bar()
    chart = chart.encode(x="desk", y="n").properties(title="Load")
    plain, large = chart.to_dict(), with_large_text(chart, scale=2.0).to_dict()
    assert large["config"]["axis"] == {"labelFontSize": 20, "titleFontSize": 22}
    assert large["config"]["legend"] == {"labelFontSize": 20, "titleFontSize": 22}
    assert large["config"]["title"] == {"fontSize": 26}
    assert {k: v for k, v in large.items() if k != "config"} == {
        k: v for k, v in plain.items() if k != "config"
    }


def test_attention_lab_in_presenter_mode_is_told_in_order():
    at = open_page(str(ROOT / "pages" / "attention_lab.py"))  # it links to the Train page
    at.query_params["present"] = "1"
    at.run()
    assert not at.exception, at.exception
    assert _styled(at) and len(at.tabs) == 0
    headers = [h.value for h in at.header]
    assert [h[0] for h in headers[:5]] == ["1", "2", "3", "4", "5"]
    assert "attention.figure.weights.prepare" in {b.key for b in at.button}
    at.toggle(key="attention.presenter").set_value(False).run()
    assert not at.exception and len(at.tabs) == 5 and not _styled(at)
