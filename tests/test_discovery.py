"""Candidate desks (issue 37): complaints that fit no desk grouped by density on the model's
embeddings (core.analysis.discovery), found in a file or the inbox (core.tasks.discovery), and a
reviewer's decision on a candidate as one verdict per member (core.review.new_desks)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from core.access import Actor, Role
from core.analysis.discovery import Discovery, DiscoveryConfig, find_candidates
from core.errors import UserError
from core.models.flagging import ReviewPolicy
from core.models.registry import load_model
from core.review.new_desks import ASSIGN, DISMISS, NAME, CandidateDecision, decide_candidate
from core.review.store import Store
from core.tasks.discovery import DiscoveryRun, Member, discover_in_file, since_moment
from tests.helpers import run_cli

REVIEWER = Actor("asha@bank.example", Role.REVIEWER, signed_in=True)
PATTERNS = {
    "locker": "bank locker rent charged twice this year for branch locker",
    "gold": "gold loan auction notice received without any prior reminder",
    "autopay": "upi autopay mandate keeps debiting after i cancelled the mandate",
}


def clustered(sizes=(30, 20, 12), stragglers=6, d=48, seed=0):
    """Tight groups of the given sizes around far-apart centres, then scattered stragglers."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(sizes), d)) * 10
    points = [c + rng.normal(size=(n, d)) * 0.3 for c, n in zip(centres, sizes, strict=True)]
    points.append(rng.normal(size=(stragglers, d)) * 40)  # far from everything
    return np.concatenate(points), centres


def texts_for(sizes=(30, 20, 12), stragglers=6):
    texts = []
    for (name, pattern), n in zip(PATTERNS.items(), sizes, strict=True):
        texts += [f"{pattern} case {i} {name}" for i in range(n)]
    return texts + [f"stray note number {i} about weather" for i in range(stragglers)]


KNOWN = {"Card Fraud": ["card blocked after fraud twice", "fraud on my card this year"]}


def find(embeddings, texts, **options):
    options = {"desk_means": None, "desks": [], "known_texts": KNOWN,
               "config": DiscoveryConfig(min_size=10)} | options  # fmt: skip
    return find_candidates(embeddings, texts, **options)


# ----------------------------------------------------------------------- the grouping


def test_dense_groups_become_candidates_largest_first_and_stragglers_stay_out():
    embeddings, _ = clustered()
    found = find(embeddings, texts_for())
    assert [(c.id, c.size) for c in found.candidates] == [("C1", 30), ("C2", 20), ("C3", 12)]
    assert found.candidates[0].members == tuple(range(30))
    assert found.unclustered == tuple(range(62, 68)) and found.considered == 68
    assert found.labels()[:31] == ["C1"] * 30 + ["C2"]


def test_words_are_distinctive_against_the_known_desks():
    embeddings, _ = clustered()
    found = find(embeddings, texts_for())
    locker, gold, autopay = (c.words for c in found.candidates)
    assert {"locker", "rent"} <= set(locker) and {"gold", "auction"} <= set(gold)
    assert "mandate" in autopay
    # "twice" is in the locker complaints but also in a known desk's, "case" in every
    # candidate's: both less telling than "locker"; stop words never show
    assert locker.index("locker") < locker.index("twice") and "case" not in locker[:3]
    assert not {"the", "this", "for", "after"} & set(locker + gold + autopay)


def test_examples_are_the_most_central_members_and_the_nearest_desk_is_named():
    embeddings, centres = clustered()
    desk_means = np.stack([centres[1] + 0.01, -centres[1]])
    found = find(embeddings, texts_for(), desk_means=desk_means, desks=["Gold", "Far"])
    gold = found.candidates[1]
    distances = np.linalg.norm(
        embeddings[list(gold.members)] - embeddings[list(gold.members)].mean(0), axis=1
    )
    assert gold.examples[0] == gold.members[int(np.argmin(distances))] and len(gold.examples) == 5
    assert gold.nearest_desk == "Gold" and gold.nearest_distance < 0.01
    assert found.example_texts(gold)[0].startswith("gold loan auction notice")


def test_personal_data_is_masked_before_words_and_examples():
    embeddings, _ = clustered()
    texts = [f"{t} card 4111 1111 1111 1111 mail asha@bank.example" for t in texts_for()]
    found = find(embeddings, texts)
    shown = " ".join(found.example_texts(found.candidates[0])) + " ".join(found.candidates[0].words)
    assert "4111" not in shown and "asha" not in shown


def test_too_few_complaints_make_no_candidate_and_the_run_is_deterministic():
    embeddings, _ = clustered(sizes=(5, 4, 3), stragglers=0)
    found = find(embeddings, texts_for((5, 4, 3), 0))
    assert found.candidates == () and len(found.unclustered) == 12
    embeddings, _ = clustered()
    first, second = find(embeddings, texts_for()), find(embeddings, texts_for())
    assert first.candidates == second.candidates


def test_a_run_reads_at_most_its_cap():
    embeddings, _ = clustered()
    with pytest.raises(UserError, match="at most 50 .*GRIEVANCE_LENS_DISCOVER_MAX"):
        find(embeddings, texts_for(), config=DiscoveryConfig(max_complaints=50))


def test_the_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("GRIEVANCE_LENS_DISCOVER_MAX", "123")
    assert DiscoveryConfig.from_env(min_size=4) == DiscoveryConfig(min_size=4, max_complaints=123)
    monkeypatch.setenv("GRIEVANCE_LENS_DISCOVER_MAX", "many")
    with pytest.raises(UserError, match="GRIEVANCE_LENS_DISCOVER_MAX must be"):
        DiscoveryConfig.from_env()


def test_since_is_read_as_utc_and_defaults_to_the_last_week():
    from datetime import UTC, datetime

    assert since_moment("2026-12-01") == "2026-12-01T00:00:00Z"
    assert since_moment("2026-12-01T05:30:00+05:30") == "2026-12-01T00:00:00Z"
    assert since_moment(None, now=datetime(2026, 12, 8, tzinfo=UTC)) == "2026-12-01T00:00:00Z"
    with pytest.raises(UserError, match="--since"):
        since_moment("1500-01-01")


# ------------------------------------------------------------------------ in a file


@pytest.fixture(scope="module")
def flagging_model(tiny_model_dir):
    """The tiny model with a policy that flags every complaint as fitting no desk."""
    loaded = load_model(tiny_model_dir)
    return dataclasses.replace(loaded, review=ReviewPolicy(0.0, unknown_threshold=-1.0))


def file_texts():
    return [f"{PATTERNS['locker']} {i}" for i in range(12)] + [
        f"{PATTERNS['gold']} {i}" for i in range(12)
    ]


def test_a_files_flagged_rows_are_grouped_and_keep_their_rows(flagging_model):
    run = discover_in_file(flagging_model, file_texts(), source="f.csv",
                           config=DiscoveryConfig(min_size=5))  # fmt: skip
    assert run.total == run.flagged == 24 and run.batch.startswith("discovery:")
    assert run.discovery.candidates, "the two repeated patterns should group"
    for candidate in run.discovery.candidates:
        rows = run.member_rows(candidate.id)
        assert len({(r - 1) // 12 for r in rows}) == 1  # each candidate is one pattern
    first = run.members[0]
    assert (first.text, first.row, first.complaint_id) == (file_texts()[0], 1, None)


def test_a_file_over_the_cap_is_refused_before_any_work(flagging_model):
    with pytest.raises(UserError, match="discovery reads at most 10"):
        discover_in_file(flagging_model, file_texts(), source="f.csv",
                         config=DiscoveryConfig(min_size=5, max_complaints=10))  # fmt: skip


def test_the_command_line_gives_candidates_rows_and_an_out_file(tmp_path, tiny_model_dir):
    path, out = tmp_path / "new.csv", tmp_path / "out.csv"
    pd.DataFrame({"complaint": file_texts()}).to_csv(path, index=False)
    result = run_cli("discover", str(path), "--model", str(tiny_model_dir), "--min-size", "5",
                     "--out", str(out), "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) >= {"candidates", "unclustered"} and document["candidates"]
    written = pd.read_csv(out, keep_default_na=False)
    assert list(written.columns) == ["complaint", "candidate"] and len(written) == 24
    for candidate in document["candidates"]:
        assert set(candidate) >= {"id", "size", "words", "examples", "nearest_desk",
                                  "nearest_distance", "rows"}  # fmt: skip
        assert [written.at[r - 1, "candidate"] for r in candidate["rows"]] == [
            candidate["id"]
        ] * candidate["size"]
    clustered_rows = sum(c["size"] for c in document["candidates"])
    assert (written["candidate"] != "").sum() == clustered_rows


def test_the_command_lines_default_size_is_the_cores():
    from core.analysis import discovery
    from core.cli import discover

    assert discover.DEFAULT_MIN_SIZE == discovery.DEFAULT_MIN_SIZE


def test_the_command_line_refuses_since_for_a_file(tmp_path, tiny_model_dir):
    path = tmp_path / "new.csv"
    pd.DataFrame({"complaint": file_texts()}).to_csv(path, index=False)
    result = run_cli("discover", str(path), "--model", str(tiny_model_dir), "--since", "2026-01-01")
    assert result.returncode == 2 and "--since reads the inbox" in result.stderr


# ------------------------------------------------------------------- a reviewer decides


def a_run(batch="discovery:abc", inbox_items=None) -> DiscoveryRun:
    """Twelve file rows (or inbox complaints), the first ten one candidate."""
    texts = [f"locker rent charged twice {i}" for i in range(12)]
    members = tuple(
        Member(t, "Loan Query", 0.4, {"Loan Query": 0.4, "Card Fraud": 0.6}, row=i + 1)
        if inbox_items is None
        else Member(t, "Loan Query", 0.4, {}, complaint_id=100 + i, open_item=inbox_items[i])
        for i, t in enumerate(texts)
    )
    from core.analysis.discovery import Candidate

    candidate = Candidate("C1", tuple(range(10)), ("locker", "rent"), (0, 1), "Loan Query", 0.3)
    discovery = Discovery((candidate,), (10, 11), 12, tuple(texts))
    return DiscoveryRun(discovery, members, "new.csv", batch, "live-tiny", "d" * 64, 12, 12)


@pytest.fixture()
def store(tmp_path):
    return Store.open(tmp_path / "lens.db")


DESKS = ["Loan Query", "Card Fraud"]


def decide(store, run, kind, desk=None, removed=()):
    return decide_candidate(store, run, CandidateDecision("C1", kind, desk, removed),
                            known_desks=DESKS, reviewer=REVIEWER.user, actor=REVIEWER)  # fmt: skip


def test_naming_a_candidate_gives_each_kept_member_the_new_desk_in_one_record(store):
    record = decide(store, a_run(), NAME, "Locker Rent", removed=(0, 1))
    items = store.triage_items(batch="discovery:abc", limit=100)
    assert len(items) == 8 and {i.final_label for i in items} == {"Locker Rent"}
    assert sorted(i.row for i in items) == list(range(3, 11)) and len(record.decided) == 8
    (event,) = [e for e in store.trail(actor=REVIEWER) if e.action == "discovery.named"]
    assert event.details | {"items": []} == {
        "candidate": "C1", "words": ["locker", "rent"], "source": "new.csv", "model": "live-tiny",
        "members": 8, "removed": 2, "desk": "Locker Rent", "items": [],
    }  # fmt: skip


def test_named_members_become_labelled_rows_of_the_next_version(store):
    from core.review.triage import decided_items

    decide(store, a_run(), NAME, "Locker Rent")
    assert [(i.text, i.final_label) for i in decided_items(store)][:1] == [
        ("locker rent charged twice 0", "Locker Rent")
    ]


def test_assigning_and_dismissing(store):
    decide(store, a_run(), ASSIGN, "Card Fraud")
    assert {i.status for i in store.triage_items(batch="discovery:abc")} == {"corrected"}
    assert decide(store, a_run(batch="discovery:other"), DISMISS).decided == ()
    assert store.triage_items(batch="discovery:other") == []
    actions = [e.action for e in store.trail(actor=REVIEWER)]
    assert "discovery.assigned" in actions and "discovery.dismissed" in actions


@pytest.mark.parametrize(
    ("kind", "desk", "message"),
    [
        (NAME, "card fraud", "'Card Fraud' is a desk the model knows: assign"),
        (ASSIGN, "Lockers", "not a desk of the model; name it"),
        (NAME, "  ", "give the desk's name"),
        (NAME, "x" * 65, "one line of at most 64"),
        (NAME, "bell\x07desk", "one line of at most 64"),
        ("rename", "X", "a decision is one of"),
    ],
)
def test_bad_decisions_are_refused_and_record_nothing(store, kind, desk, message):
    with pytest.raises(UserError, match=message):
        decide(store, a_run(), kind, desk)
    assert store.triage_items(limit=100) == [] and store.trail(actor=REVIEWER) == []


def test_removing_every_member_or_a_stranger_is_refused(store):
    with pytest.raises(UserError, match="dismiss it instead"):
        decide(store, a_run(), NAME, "Lockers", removed=tuple(range(10)))
    with pytest.raises(UserError, match="not members of C1"):
        decide(store, a_run(), NAME, "Lockers", removed=(11,))


def test_inbox_members_are_decided_on_their_waiting_items_and_a_late_verdict_stops_all(store):
    from core.review.records import TriageItem

    queued = store.enqueue_triage(
        [TriageItem("inbox", f"t{i}", "Loan Query", 0.4, row=100 + i) for i in range(12)],
        actor=REVIEWER,
    )
    store.decide_triage(queued[3], final_label="Card Fraud", reviewer=REVIEWER.user, actor=REVIEWER)
    run = a_run(batch="inbox", inbox_items=[*queued[:3], None, *queued[4:]])
    record = decide(store, run, NAME, "Locker Rent")
    assert record.skipped == 1 and len(record.decided) == 9
    late = a_run(batch="inbox", inbox_items=queued)  # item 3 decided meanwhile: nothing changes
    decided_before = len(store.triage_items(status="corrected", limit=100))
    with pytest.raises(UserError, match="already corrected"):
        decide(store, late, NAME, "Lockers")
    assert len(store.triage_items(status="corrected", limit=100)) == decided_before


def test_viewers_may_not_decide(store):
    viewer = Actor("v@bank.example", Role.VIEWER, signed_in=True)
    with pytest.raises(PermissionError):
        decide_candidate(store, a_run(), CandidateDecision("C1", NAME, "Lockers"),
                         known_desks=DESKS, reviewer=viewer.user, actor=viewer)  # fmt: skip


# ------------------------------------------------------------------------- the inbox


def flagged_inbox(store, received="2026-12-02T08:00+00:00"):
    """24 complaints the live model flagged as fitting no desk (two new patterns), two routed
    ones, and one flagged before the period; returns the token."""
    from core.access import OPERATOR
    from core.board.tat import load_tat
    from core.intake.inbox import Routing, store_batch
    from core.intake.tokens import create_token
    from tests.helpers import inbox_submission

    token = create_token(store, "crm", ["submit", "read"], actor=OPERATOR).token
    unknown = Routing("Loan Query", 0.5, True, "unknown desk", 0.99, "transformer",
                      {"Loan Query": 0.5, "Card Fraud": 0.5})  # fmt: skip
    routed = Routing("Card Fraud", 0.9, False, "", 0.1, "transformer",
                     {"Loan Query": 0.1, "Card Fraud": 0.9})  # fmt: skip
    items = [(inbox_submission(f"n-{i}", t, "app", received), unknown)
             for i, t in enumerate(file_texts())]  # fmt: skip
    items += [(inbox_submission(f"r-{i}", f"card fraud alert {i}", "app", received), routed)
              for i in range(2)]  # fmt: skip
    items.append((inbox_submission("old", "an old odd one", "app", "2026-11-01T08:00+00:00"),
                  unknown))  # fmt: skip
    store_batch(store, token, items, model=("tiny", "d"), tat=load_tat())
    return token


def test_the_inbox_flagged_since_a_time_is_grouped_and_a_name_reaches_the_updates_feed(
    store, flagging_model
):
    from core.intake.inbox import updates_after
    from core.tasks.discovery import discover_in_inbox

    token = flagged_inbox(store)
    run = discover_in_inbox(store, flagging_model, since="2026-12-01T00:00:00Z",
                            config=DiscoveryConfig(min_size=5))  # fmt: skip
    assert run.total == 24 and run.batch == "inbox"
    assert all(m.open_item is not None and m.complaint_id for m in run.members)
    candidate = run.discovery.candidates[0]
    decision = CandidateDecision(candidate.id, NAME, "Locker Rent")
    record = decide_candidate(store, run, decision, known_desks=DESKS, reviewer=REVIEWER.user,
                              actor=REVIEWER)  # fmt: skip
    assert len(record.decided) == candidate.size
    updates, _ = updates_after(store, source=token.source, after=0, limit=100)
    assert sum(u.desk == "Locker Rent" for u in updates) == candidate.size


def test_the_command_line_reads_the_inbox(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("GRIEVANCE_LENS_DATA_DIR", str(tmp_path))
    with Store.open(tmp_path / "lens.db") as opened:
        flagged_inbox(opened)
    result = run_cli("discover", "inbox", "--model", str(tiny_model_dir), "--since",
                     "2026-12-01", "--min-size", "5", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["source"] == "the inbox since 2026-12-01T00:00:00Z"
    assert document["flagged"] == 24 and document["candidates"]
    for candidate in document["candidates"]:
        assert "complaints" in candidate and "rows" not in candidate
