"""AppTest of the Train page's "Challenger against live" section (ui.compare), drawn alone: the
defaults (A live, B the newest other model, the saved rows, the reviewers' verdicts), a
comparison on the queue, its report, and the promotion an admin makes from it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.access import OPERATOR
from core.data.dataset import Dataset
from core.data.saved import DatasetSave, datasets_root, save_dataset
from core.models.blend import Blend
from core.review.live import live_model, promote_model, promotion_report
from core.review.records import TriageItem
from core.review.store import Store, default_db_path
from core.roles import ROLES_ENV
from tests.helpers import AUTH, TINY_LABELS, TINY_TEXTS, with_blend
from ui.safe import md_escape

# Complaints the tiny model never trained on (its card's split holds TINY_TEXTS' keys).
HELD_OUT = [
    f"{text} since yesterday {'please ' * (i // 8)}".strip()
    for i, text in enumerate(TINY_TEXTS * 3)
]
ROLES = """
admin = ["lead@bank.example"]
reviewer = ["asha@bank.example"]
viewer = ["*@bank.example"]
"""


def _section() -> None:
    from ui.compare import render_challenger_section

    render_challenger_section()


@pytest.fixture()
def lens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> Path:
    """A server state of its own: models "live" (promoted) and "challenger" (its bag of words
    decides; saved later, so newest), a saved data set "held" and one triage verdict."""
    models = tmp_path / "models"
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(models))
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "data"))
    shutil.copytree(tiny_model_dir, models / "live")
    challenger = with_blend(tiny_model_dir, models / "challenger", Blend(neural_weight=0.0))
    card = json.loads((challenger / "card.json").read_text())
    card["created_at"] = "2999-01-01T00:00:00+00:00"  # the newest model: B by default
    (challenger / "card.json").write_text(json.dumps(card))
    save_dataset(
        datasets_root(), DatasetSave("held", Dataset(HELD_OUT, TINY_LABELS * 3)), actor=OPERATOR
    )
    with Store.open(default_db_path()) as store:
        promote_model(store, models, "live", reason="the first model", actor=OPERATOR)
        item = TriageItem("b.csv", "my upi refund is stuck", "Card Fraud", 0.4, {})
        (item_id,) = store.enqueue_triage([item], actor=OPERATOR)
        store.decide_triage(item_id, final_label="UPI Dispute", reviewer="r", actor=OPERATOR)
    return models


def section(**signed_in: str) -> AppTest:
    at = AppTest.from_function(_section, default_timeout=60)
    if signed_in:
        at.secrets["auth"] = AUTH
        at.user = {"is_logged_in": True, "email": signed_in["email"], "email_verified": True}
    return at.run()


def compare(at: AppTest) -> None:
    at.button(key="compare.start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    snapshot = at.session_state["compare.run"].job.wait(120)
    assert snapshot.status == "done", snapshot.error
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_with_one_model_the_section_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path
):
    monkeypatch.setenv("GRIEVANCE_LENS_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "data"))
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "only")
    at = section()
    assert not at.exception
    assert any("needs two saved models" in c.value for c in at.caption)
    assert not any(b.key == "compare.start" for b in at.button)


def test_an_admin_compares_the_challenger_with_live_and_promotes_it(lens: Path):
    at = section()
    assert not at.exception
    assert at.selectbox(key="compare.a").value == "live"
    assert at.selectbox(key="compare.b").value == "challenger"
    assert at.selectbox(key="compare.rows").value == "held"
    gold = at.checkbox(key="compare.gold")
    assert gold.value and "Add the 1 triage verdicts" in gold.label
    assert any("A is the team's live model" in c.value for c in at.caption)
    compare(at)
    comparison = at.session_state["compare.run"].comparison
    assert comparison.rows == 25 and comparison.gold_rows == 1
    assert at.info[0].value == md_escape(comparison.verdict)
    scores = at.dataframe[0].value
    assert list(scores["model"]) == ["A: live", "B: challenger"]
    assert scores["accuracy"].tolist() == [comparison.a.accuracy, comparison.b.accuracy]
    assert any(
        f"{len(comparison.changed):,} complaints change desk" in m.value for m in at.markdown
    )
    if comparison.changed:
        changed = at.dataframe[2].value
        assert len(changed) == len(comparison.changed)
        assert "reviewers' desk" in changed.columns
    assert at.get("download_button")  # the JSON report
    at.text_area(key="compare.reason").input("better on the held-out rows")
    next(b for b in at.button if b.label == "Promote challenger to live").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    promoted = md_escape("challenger is now the team's live model.")
    assert [s.value for s in at.success] == [promoted]
    with Store.open(default_db_path()) as store:
        live = live_model(store)
        assert live.name == "challenger" and live.reason == "better on the held-out rows"
        report = promotion_report(store, live)
        assert report["rows"] == 25 and report["b"]["name"] == "challenger"
        (event,) = store.events("comparison.run")
        assert event.details["b"]["name"] == "challenger"


@pytest.fixture()
def roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lens: Path) -> Path:
    path = tmp_path / "roles.toml"
    path.write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(path))
    return path


def test_a_reviewer_compares_but_cannot_promote(roles: Path):
    at = section(email="asha@bank.example")
    compare(at)
    assert at.session_state["compare.run"].comparison is not None
    assert any("Promoting a model needs the admin role" in c.value for c in at.caption)
    assert not any(b.label.startswith("Promote") for b in at.button)


def test_a_viewer_sees_the_picks_but_cannot_start(roles: Path):
    at = section(email="vera@bank.example")
    assert not at.exception
    assert any("Comparing models needs the reviewer role" in c.value for c in at.caption)
    assert not any(b.key == "compare.start" for b in at.button)
