"""AppTest for the Routing board page: on the demo data with no model its per-desk numbers equal
breach counts worked out here straight from the demo file and the TAT file (pandas and tomllib,
not core.board); a classified file's what-if is the one core.board counts; a broken TAT file is
one line; an at-risk complaint opens on Explain; a viewer reads the board but cannot route."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from core.board.board import BoardConfig, build_board
from core.board.tat import DEFAULT_TAT_PATH, load_tat
from core.charts.board import what_if_frame
from core.data.demo import DemoConfig, generate_demo_data
from core.roles import ROLES_ENV
from core.tasks.classify import ClassifiedFile
from tests.helpers import AUTH, ROOT, open_page
from ui.safe import md_escape
from ui.state import CLASSIFY_JOB

PAGE = "pages/board.py"
AS_OF = datetime.now(UTC).replace(second=0, microsecond=0)


@pytest.fixture(autouse=True)
def own_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("GRIEVANCE_LENS_TAT", raising=False)


def board_page(*, as_of: datetime = AS_OF, state: dict | None = None) -> AppTest:
    """The page through the router, ages measured at `as_of` (?as_of=), run once."""
    at = open_page(PAGE, state)
    at.query_params["as_of"] = as_of.isoformat()
    return at.run()


def use_demo(at: AppTest) -> AppTest:
    at.button(key="board.use_demo").click().run()
    assert not at.exception
    return at


def desk_table(at: AppTest) -> pd.DataFrame:
    frame = next(d.value for d in at.dataframe if "breached" in d.value.columns)
    return frame.set_index("desk")


def metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def expected_demo_desks(as_of: datetime) -> pd.DataFrame:
    """Open, breached and due within 24 h per desk, from the demo file and the TAT file alone:
    age = as_of - received_at; breached when age > TAT; due when TAT - 24 <= age <= TAT."""
    demo = generate_demo_data(DemoConfig())
    tat = tomllib.loads(DEFAULT_TAT_PATH.read_text(encoding="utf-8"))
    hours = demo["desk"].map(lambda d: tat["desks"].get(d, {}).get("hours", tat["default_hours"]))
    received = pd.to_datetime(demo["received_at"], format="ISO8601", utc=True)
    left = hours - (pd.Timestamp(as_of) - received).dt.total_seconds() / 3600
    counts = pd.DataFrame({"desk": demo["desk"], "breached": left < 0,
                           "due in 24 h": (left >= 0) & (left <= 24)})  # fmt: skip
    expected = counts.groupby("desk").agg(
        open=("desk", "size"), breached=("breached", "sum"), due=("due in 24 h", "sum")
    )
    return expected.rename(columns={"due": "due in 24 h"})


def test_demo_board_counts_match_the_file():
    at = use_demo(board_page())
    shown = desk_table(at)
    expected = expected_demo_desks(AS_OF)
    columns = ["open", "breached", "due in 24 h"]
    assert shown[columns].sort_index().astype(int).equals(expected[columns].astype(int))
    assert expected["breached"].sum() > 0  # the demo queue has breaches to show
    assert metric(at, "Breached") == f"{expected['breached'].sum():,}"
    assert metric(at, "Due within 24 h") == f"{expected['due in 24 h'].sum():,}"
    assert shown.loc["UPI Dispute", "TAT (h)"] == 24
    assert any(f"as of {AS_OF.astimezone(load_tat_zone()).strftime('%d %b %Y %H:%M')}" in c.value
               for c in at.caption)  # fmt: skip
    assert [w.value for w in at.warning] == []  # a file routed by hand is not a problem
    what_if = "the what-if needs a needs_review column: classify the file first"
    assert any(md_escape(what_if) in m.value for m in at.markdown)


def load_tat_zone():
    from zoneinfo import ZoneInfo

    return ZoneInfo(load_tat().timezone)


def test_a_broken_tat_file_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    broken = tmp_path / "tat.toml"
    text = DEFAULT_TAT_PATH.read_text(encoding="utf-8").replace("hours = 240", "hours = -240")
    broken.write_text(text, encoding="utf-8")
    monkeypatch.setenv("GRIEVANCE_LENS_TAT", str(broken))
    at = board_page()
    assert not at.exception
    assert len(at.error) == 1
    line = text.splitlines().index("hours = -240") + 1
    assert f"line {line}" in at.error[0].value
    assert not at.metric and not at.radio  # the page stopped at the TAT file


def classified_file(tmp_path: Path) -> ClassifiedFile:
    """Four classified complaints, two unsure, with the reviewed desk beside the routed one."""
    table = pd.DataFrame(
        {
            "text": ["upi a", "upi b", "card a", "loan a"],
            "desk": ["Card Fraud", "UPI Dispute", "Card Fraud", "Loan Query"],
            "received_at": ["2025-06-01T10:00+05:30", "2025-06-03T08:00+05:30",
                            "2025-05-25T10:00+05:30", "2025-06-02T10:00+05:30"],
            "predicted_label": ["UPI Dispute", "UPI Dispute", "Card Fraud", "Card Fraud"],
            "confidence": [0.45, 0.9, 0.8, 0.4],
            "needs_review": [True, False, False, True],
            "prob_UPI Dispute": [0.45, 0.9, 0.1, 0.2],
            "prob_Card Fraud": [0.4, 0.05, 0.8, 0.4],
            "prob_Loan Query": [0.15, 0.05, 0.1, 0.4],
        }
    )  # fmt: skip
    path = tmp_path / "classified.parquet"
    table.to_parquet(path, index=False)
    return ClassifiedFile(path, len(table), 2, 1)


def test_a_classified_file_shows_its_what_if(tmp_path: Path):
    classified = classified_file(tmp_path)
    run = SimpleNamespace(classified=classified, file_name="march.csv", job=None)
    as_of = datetime(2025, 6, 3, 12, 0, tzinfo=UTC)
    at = board_page(as_of=as_of, state={CLASSIFY_JOB: run})
    at.radio(key="board.source").set_value("The file classified on Classify").run()
    assert not at.exception
    board = build_board(classified.read(), load_tat(), BoardConfig(as_of=as_of))
    assert board.what_if is not None
    shown = next(d.value for d in at.dataframe if "scenario" in d.value.columns)
    assert shown.equals(what_if_frame(board))
    assert shown["changed desk"].tolist()[0] == 0  # "as routed" changes nothing
    assert metric(at, "Unsure (needs review)") == "2"
    assert desk_table(at).loc["UPI Dispute", "breached"] == 1  # row 2: 55.5 h old, TAT 24 h
    at.button(key="board.explain").click().run()  # not the active data set: by its text
    assert at.session_state["explain.text"] == "upi a"
    assert at.session_state["explain.source"] == "Type a complaint"
    assert [t.value for t in at.title] == ["Explain"]


def test_an_at_risk_complaint_opens_on_explain():
    at = use_demo(board_page())
    row = at.selectbox(key="board.explain_row").value
    at.button(key="board.explain").click().run()
    assert not at.exception
    assert at.query_params["row"] == str(row)  # Explain opens that row of the data set
    assert [t.value for t in at.title] == ["Explain"]
    assert at.session_state["explain.source"] == "Pick one from the data set"


ROLES = 'viewer = ["*@bank.example"]\n'


def test_a_viewer_reads_the_board_but_cannot_route(tmp_path: Path, monkeypatch):
    roles = tmp_path / "roles.toml"
    roles.write_text(ROLES)
    monkeypatch.setenv(ROLES_ENV, str(roles))
    at = AppTest.from_file(str(ROOT / PAGE), default_timeout=60)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "vera@bank.example", "email_verified": True}
    at.query_params["as_of"] = AS_OF.isoformat()
    use_demo(at.run())
    assert desk_table(at)["open"].sum() == 3000
    at.radio(key="board.source").set_value("The active data set, routed by the model").run()
    assert any("needs the reviewer role" in c.value for c in at.caption)
    assert not [b for b in at.button if b.key == "board.route"]


ROUTED = pd.DataFrame(
    {
        "text": ["upi payment failed but money debited", "fraud transaction on my credit card",
                 "emi charged twice on my home loan", "please update my kyc address"],
        "desk": ["UPI Dispute", "Card Fraud", "Loan Query", "KYC Update"],
        "received_at": ["2025-06-01T10:00+05:30", "2025-06-03T08:00+05:30",
                        "2025-05-25T10:00+05:30", "2025-06-02T10:00+05:30"],
    }
)  # fmt: skip


def test_the_model_routes_the_data_set_once(tiny_model_dir: Path):
    """Routed by the session's model on the queue; the data set's desks are the reviewed ones,
    and a rerun shows the same routing without classifying again."""
    from core.data.validation import validate
    from ui.state import ACTIVE_DATASET, ActiveDataset

    dataset, report = validate(ROUTED, text_col="text", label_col="desk")
    active = ActiveDataset("four complaints", dataset, report)
    as_of = datetime(2025, 6, 3, 12, 0, tzinfo=UTC)
    state = {"active_model": str(tiny_model_dir), ACTIVE_DATASET: active}
    at = board_page(as_of=as_of, state=state)
    at.radio(key="board.source").set_value("The active data set, routed by the model").run()
    at.button(key="board.route").click().run()
    run = at.session_state["board.routed"]
    run.job.wait(60)
    at.run()
    assert not at.exception
    routed = at.session_state["board.routed"].classified.read()  # kept once seen
    assert routed["desk"].tolist() == ROUTED["desk"].tolist()  # kept beside predicted_label
    board = build_board(routed, load_tat(), BoardConfig(as_of=as_of))
    assert board.what_if is not None and board.what_if.basis == "reviewed desk column desk"
    shown = next(d.value for d in at.dataframe if "scenario" in d.value.columns)
    assert shown.equals(what_if_frame(board))
    at.run()
    assert at.session_state["board.routed"].job is run.job  # not classified again


def test_an_uploaded_file_is_boarded():
    at = board_page(as_of=datetime(2025, 6, 3, 12, 0, tzinfo=UTC))
    at.radio(key="board.source").set_value("An uploaded classified file").run()
    csv = ROUTED.to_csv(index=False).encode()
    at.file_uploader(key="board.upload").set_value(("june.csv", csv, "text/csv")).run()
    assert not at.exception
    shown = desk_table(at)
    # UPI: 55.5 h old against 24 h; Card: 9.5 h of 240; Loan and KYC: default-free 720 h.
    assert shown["breached"].to_dict() == {
        "Card Fraud": 0, "KYC Update": 0, "Loan Query": 0, "UPI Dispute": 1,
    }  # fmt: skip


def test_a_desk_has_its_own_at_risk_list():
    """On the demo data the all-desks list is mostly the UPI desk (a 24-hour clock); picking
    Card Fraud lists that desk's own most urgent complaints, all of them when they fit."""
    at = use_demo(board_page())
    risk = next(d.value for d in at.dataframe if "hours left" in d.value.columns)
    assert (risk["desk"] == "UPI Dispute").mean() > 0.5
    at.selectbox(key="board.risk_desk").set_value("Card Fraud").run()
    risk = next(d.value for d in at.dataframe if "hours left" in d.value.columns)
    card = desk_table(at).loc["Card Fraud"]
    assert set(risk["desk"]) == {"Card Fraud"}
    assert len(risk) == min(100, int(card["breached"]) + int(card["due in 24 h"]))
    assert list(risk["hours left"]) == sorted(risk["hours left"])


def test_the_data_sets_table_is_built_once_per_data_set(monkeypatch):
    import ui.board

    built = []
    real = ui.board.dataset_table
    monkeypatch.setattr(ui.board, "dataset_table", lambda *a, **k: built.append(1) or real(*a, **k))
    at = use_demo(board_page())
    at.selectbox(key="board.risk_desk").set_value("Card Fraud").run()  # a rerun of the page
    assert not at.exception and len(built) == 1


def test_an_upload_with_a_desk_per_row_is_refused_in_one_line():
    """A viewer's file whose desk column holds one value per row is refused at once (issue 38):
    a board draws at most MAX_BOARD_DESKS desks."""
    rows = 300
    upload = pd.DataFrame({
        "text": [f"complaint number {i} about a payment" for i in range(rows)],
        "desk": [f"desk {i}" for i in range(rows)],
        "received_at": ["2025-06-01T10:00+05:30"] * rows,
    })  # fmt: skip
    at = board_page(as_of=datetime(2025, 6, 3, 12, 0, tzinfo=UTC))
    at.radio(key="board.source").set_value("An uploaded classified file").run()
    csv = upload.to_csv(index=False).encode()
    at.file_uploader(key="board.upload").set_value(("ids.csv", csv, "text/csv")).run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("300 distinct desks" in e and "at most 200" in e for e in errors), errors
    assert not [d for d in at.dataframe if "breached" in d.value.columns]


@pytest.mark.parametrize("raw", ["2300-01-01T00:00+05:30", "1500-01-01", "yesterday"])
def test_an_as_of_link_outside_the_years_or_not_a_time_is_a_warning_not_a_crash(raw: str):
    at = open_page(PAGE)
    at.query_params["as_of"] = raw
    at.run()
    at = use_demo(at)
    assert not at.exception
    (warning,) = [w.value for w in at.warning if "ages are measured now" in w.value]
    reason = "not a date and time" if raw == "yesterday" else "is outside the years 1900 to 2199"
    assert reason in warning and "as\\_of" in warning  # names the link's parameter (escaped)
