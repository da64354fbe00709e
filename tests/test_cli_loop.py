"""The closed loop on the command line (`save-dataset`, `datasets`, `retrain`, with `promote` and
`compare`): the operator saves a data set, the team's decisions are folded into its next
version, and the challenger is trained with the live model's recipe; in-process through
core.cli.main on a copy of the session's tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from core.access import OPERATOR
from core.models.classifier import Prediction
from core.paths import DATA_DIR_ENV, MODELS_DIR_ENV
from core.review.records import ReviewDecision
from core.review.store import DB_NAME, Store
from core.review.triage import enqueue_uncertain
from tests.helpers import TINY_LABELS, TINY_TEXTS, run_cli
from tests.test_cli import assert_one_line_error

FRESH = [f"{text}, complaint number {i}" for i in range(4) for text in TINY_TEXTS]


@pytest.fixture
def folders(tmp_path: Path, tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's data and models folders (the tiny model as `tiny-live`) and a labelled file
    `march.csv` of 40 complaints."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    monkeypatch.setenv(MODELS_DIR_ENV, str(tmp_path / "models"))
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "tiny-live")
    frame = pd.DataFrame({"text": TINY_TEXTS + FRESH, "desk": TINY_LABELS * 5})
    frame.to_csv(tmp_path / "march.csv", index=False)
    return tmp_path


def ok(*args: str) -> dict:
    result = run_cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_save_list_retrain_and_compare_on_the_command_line(folders: Path):
    saved = ok("save-dataset", str(folders / "march.csv"), "march")
    assert (saved["name"], saved["rows"], saved["saved_by"]) == ("march", 40, "operator")
    assert [d["name"] for d in ok("datasets")["datasets"]] == ["march"]
    ok("promote", "tiny-live", "--reason", "the model in use")
    with Store.open(folders / "data" / DB_NAME) as store:
        store.record_decision(
            ReviewDecision(saved["fingerprint"], 3, TINY_TEXTS[1], TINY_LABELS[1], "relabel",
                           "operator", new_label="Card Fraud"),
            actor=OPERATOR,
        )  # fmt: skip
        store.record_decision(
            ReviewDecision(saved["fingerprint"], 4, TINY_TEXTS[2], TINY_LABELS[2], "exclude",
                           "operator"),
            actor=OPERATOR,
        )  # fmt: skip

    plan = ok("retrain", "march", "--plan-only")
    assert plan["plan"]["relabelled"] == 1 and plan["plan"]["excluded"] == 1
    assert plan["plan"]["rows_after"] == 39 and plan["by_reviewer"] == {"operator": 2}

    done = ok("retrain", "march")
    assert done["dataset"] == "march-v2" and done["challenger"] == "march-v2-challenger"
    assert done["recipe_model"] == "tiny-live" and done["split"] == "inherited"
    card = json.loads((Path(done["model_dir"]) / "card.json").read_text(encoding="utf-8"))
    assert card["train_config"]["backbone"] == "tiny"  # the live model's recipe
    version = ok("datasets")["datasets"][0]
    assert version["parent"] == "march" and version["lineage"]["excluded_rows"] == [4]
    again = run_cli("retrain", "march")
    assert_one_line_error(again, "already built as march-v2")
    with Store.open(folders / "data" / DB_NAME, read_only=True) as store:
        (event,) = store.events("retrain.queued")
    assert event.actor == "operator" and event.details["challenger"] == "march-v2-challenger"

    fresh = folders / "april.csv"
    pd.DataFrame({"text": [f"{t} in april, case {i}" for i in range(4) for t in TINY_TEXTS],
                  "desk": TINY_LABELS * 4}).to_csv(fresh, index=False)  # fmt: skip
    report = ok("compare", "--model", "live", "--model", "march-v2-challenger", str(fresh))
    assert report["rows"] == 32 and report["a"]["name"] == "tiny-live"
    assert report["gold_rows"] == 0

    # A verdict given after the live model was trained is a gold row with --with-verdicts.
    with Store.open(folders / "data" / DB_NAME) as store:
        unsure = Prediction("UPI Dispute", {"UPI Dispute": 0.5, "Card Fraud": 0.5}, True)
        (item,) = enqueue_uncertain(
            store, ["a hotel charged my card for a stay i never made"], [unsure], threshold=0.6,
            batch="may.csv", actor=OPERATOR,
        )  # fmt: skip
        store.decide_triage(item, final_label="Card Fraud", reviewer="operator", actor=OPERATOR)
    args = ("compare", "--model", "live", "--model", "march-v2-challenger", str(fresh))
    report = ok(*args, "--with-verdicts")
    assert report["rows"] == 33 and report["gold_rows"] == 1


def test_retrain_without_corrections_or_data_set_is_refused(folders: Path):
    ok("save-dataset", str(folders / "march.csv"), "march")
    ok("promote", "tiny-live", "--reason", "the model in use")
    assert_one_line_error(run_cli("retrain", "march"), "no corrections to apply")
    assert_one_line_error(run_cli("retrain", "nowhere"), "nowhere")
