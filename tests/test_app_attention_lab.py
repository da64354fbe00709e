"""AppTest for the Attention lab page: hand-checkable numbers, "again", edits, PE demo, cost."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers import open_page

ROOT = Path(__file__).resolve().parent.parent
PAGE = str(ROOT / "pages" / "attention_lab.py")
TEXTBOOK_NUMBERS = ["0.599", "1.401", "0.802", "0.752", "1.503", "0.1978", "0.4011"]


@pytest.fixture()
def app() -> AppTest:
    at = open_page(PAGE).run()
    assert not at.exception
    return at


def _cells(at: AppTest) -> set[str]:
    """Every cell of every st.table on the page, as the text it renders."""
    return {str(v) for table in at.table for v in table.value.to_numpy().ravel()}


def _output_table(at: AppTest):
    """The worked example's output table (columns z1, z2), the first one on the page."""
    return next(t.value for t in at.table if list(t.value.columns) == ["z1", "z2"])


def _editor_state(edited_rows=None, added_rows=None, deleted_rows=None) -> dict:
    return {
        "edited_rows": edited_rows or {},
        "added_rows": added_rows or [],
        "deleted_rows": deleted_rows or [],
    }


def test_default_worked_example_numbers_are_in_tables(app: AppTest):
    assert app.title[0].value == "Attention lab"
    cells = _cells(app)
    for number in TEXTBOOK_NUMBERS:
        assert number in cells, number
    output = _output_table(app)
    assert list(output.index) == ["UPI", "failed", "instantly"]
    assert output.loc["UPI"].tolist() == ["0.599", "1.401"]
    assert "0.7071" in cells  # 1/√2, the scaled score
    hand = [t.value for t in app.text]
    assert "weights = e^s / sum = [0.1978, 0.4011, 0.4011]" in hand[0]
    assert hand[1].endswith("= [0.599, 1.401]")
    assert not app.error


def test_again_toggle_reweights_every_token(app: AppTest):
    app.toggle(key="attention.again").set_value(True).run()
    assert not app.exception
    cells = _cells(app)
    assert {"0.1412", "0.2863"} <= cells
    output = _output_table(app)
    assert list(output.index) == ["UPI", "failed", "instantly", "again"]
    assert output.loc["UPI"].tolist() == ["0.141", "1.000"]
    changes = next(t.value for t in app.table if "change" in t.value.columns)
    assert len(changes) == 16
    first = changes.iloc[0].tolist()
    assert first == ["UPI", "UPI", "0.1978", "0.1412", "-0.0566"]
    old = changes[changes["before"] != "new"]
    assert len(old) == 9 and all(c.startswith("-") for c in old["change"])
    assert any(getattr(e, "type", "") == "vega_lite_chart" for e in app.main.tabs[0])


def test_projection_edit_flows_through_every_step():
    at = open_page(PAGE, {"attention.W_Q": _editor_state({0: {"q1": 2.0}})}).run()
    assert not at.exception
    q = next(t.value for t in at.table if list(t.value.columns) == ["q1", "q2"])
    assert q.loc["UPI"].tolist() == ["2.000", "0.000"]
    assert _output_table(at).loc["UPI"].tolist() != ["0.599", "1.401"]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (_editor_state({0: {"x1": None}}), "missing or infinite"),
        (_editor_state(added_rows=[{"x1": 1.0, "x2": 0.5}]), "row 4 of X has no token name"),
        (_editor_state(deleted_rows=[0, 1, 2]), "add at least one token"),
    ],
)
def test_invalid_edit_gives_an_error_not_an_exception(state, message):
    at = open_page(PAGE, {"attention.X": state}).run()
    assert not at.exception
    assert len(at.error) == 1
    assert message in at.error[0].value
    assert "Traceback" not in at.error[0].value
    assert any("Fix the worked example" in i.value for i in at.info)  # two heads wait
    assert any("dim 0" in t.value.columns for t in at.table)  # later sections still render


def test_two_heads_concatenate_and_project(app: AppTest):
    concat = next(t.value for t in app.table if "h2 z1" in t.value.columns)
    assert concat.loc["UPI"].tolist()[:2] == ["0.599", "1.401"]  # head 1 is the worked example
    projected = next(t.value for t in app.table if list(t.value.columns) == ["o1", "o2"])
    assert projected.shape == (3, 2)


def test_positional_encoding_matrix_follows_the_sliders(app: AppTest):
    pe = next(t.value for t in app.table if "dim 5" in t.value.columns and "pos 0" in t.value.index)
    assert pe.loc["pos 1", "dim 0"] == "0.8415"  # sin 1
    assert pe.loc["pos 1", "dim 1"] == "0.5403"  # cos 1
    app.slider(key="attention.pe_n").set_value(3)
    app.slider(key="attention.pe_d").set_value(4).run()
    assert not app.exception
    pe = next(t.value for t in app.table if "pos 0" in t.value.index)
    assert pe.shape == (3, 4)
    assert pe.loc["pos 0"].tolist() == ["0.0000", "1.0000", "0.0000", "1.0000"]


def test_word_order_demo_identical_without_pe_different_with_it(app: AppTest):
    off = " ".join(i.value for i in app.info)
    on = " ".join(s.value for s in app.success)
    assert "Positional encoding off: identical outputs" in off
    assert "Positional encoding on: different outputs" in on
    probs = [t.value for t in app.table if list(t.value.columns) == ["class A", "class B"]]
    assert len(probs) == 2
    assert probs[0].iloc[0].tolist() == probs[0].iloc[1].tolist()  # off: same row twice
    assert probs[1].iloc[0].tolist() != probs[1].iloc[1].tolist()  # on: rows differ


def test_word_order_demo_explains_different_bags(app: AppTest):
    app.text_input(key="attention.order_text2").input("Australia beat India").run()
    assert not app.exception
    assert any("different bags of words" in i.value for i in app.info)


def test_cost_shows_the_textbook_counts(app: AppTest):
    values = {m.label: m.value for m in app.metric}
    assert values["Self-attention: n²·d operations"] == "1.92×10⁸"
    assert values["Recurrent layer: n·d² operations"] == "2.95×10⁸"
    assert values["Sequential steps"] == "1 vs 500"


def test_timing_runs_on_submit_and_stays(app: AppTest):
    assert not any("Measured at" in c.value for c in app.caption)
    app.select_slider(key="attention.timing_max_n").set_value(64)
    app.select_slider(key="attention.timing_d").set_value(64)
    app.slider(key="attention.repeats").set_value(1)
    app.button(key="FormSubmitter:attention.timing_form-Measure on this machine").click().run()
    assert not app.exception
    caption = next(c.value for c in app.caption if "Measured at" in c.value)
    assert "thread" in caption and "median of 1 timed run" in caption
    timing = next(t.value for t in app.table if "LSTM ÷ attention" in t.value.columns)
    assert len(timing) == 3  # n = 16, 32, 64
    app.toggle(key="attention.again").set_value(True).run()  # another widget: still shown
    assert any("Measured at" in c.value for c in app.caption)


def test_reset_restores_the_textbook_numbers():
    at = open_page(PAGE, {"attention.X": _editor_state({0: {"x1": None}})}).run()
    assert at.error
    at.button(key="attention.reset").click().run()
    assert not at.exception and not at.error
    assert _output_table(at).loc["UPI"].tolist() == ["0.599", "1.401"]
