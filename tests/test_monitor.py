"""The live monitor's figures (core.monitor, core.intake.monitor, core.models.profile): PSI
on numbers worked out by hand, the warning rules at and around their thresholds, the validation
profile a training saves, and the report built from grouped complaints, from the store's inbox
(the SQL grouping equals the Python one, bin edges included) and from the trail's latencies."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from core.access import OPERATOR
from core.board.tat import load_tat
from core.errors import UserError
from core.intake.inbox import Routing, Submission, store_batch
from core.intake.monitor import live_baseline, read_groups, read_latency, read_monitor
from core.intake.tokens import create_token
from core.models.profile import (
    CONFIDENCE_EDGES,
    ValidationProfile,
    confidence_bins,
    confidence_counts,
    validation_profile,
)
from core.monitor.drift import (
    CONFIDENCE,
    DESK_MIX,
    UNKNOWN_DESK,
    DriftRule,
    WeekCounts,
    judge_week,
    psi,
    smoothed_shares,
)
from core.monitor.report import (
    MAX_CHANNELS,
    OTHER_CHANNELS,
    Baseline,
    MonitorCache,
    build_report,
    card_baseline,
    default_since,
    group_rows,
    latency_of,
)
from core.review.live import promote_model
from core.review.store import Store

DESKS = ("Card Fraud", "KYC Update", "Loan Query", "UPI Dispute")
NOW = datetime(2026, 5, 13, 12, 0, tzinfo=UTC)  # a Wednesday of ISO week 2026-W20
SINCE = datetime(2026, 5, 4, tzinfo=UTC)  # Monday of 2026-W19


def profile(rows: int = 400, unknown: float | None = 0.05) -> ValidationProfile:
    """Validation rows spread evenly over four desks, nearly all very confident."""
    counts = [0] * (len(CONFIDENCE_EDGES) - 1)
    counts[-1], counts[-3] = rows - rows // 10, rows // 10
    return ValidationProfile(
        rows, CONFIDENCE_EDGES, tuple(counts), dict.fromkeys(DESKS, rows // 4), unknown, 0.08
    )


def week(desks: dict[str, int], *, top_share: float = 0.9, unknown: int = 0) -> WeekCounts:
    n = sum(desks.values())
    counts = [0] * (len(CONFIDENCE_EDGES) - 1)
    counts[-1] = round(n * top_share)
    counts[-3] = n - counts[-1]
    return WeekCounts("2026-W20", "2026-05-11", n, desks, tuple(counts), unknown, unknown)


# ------------------------------------------------------------------------------------ the math


def test_psi_on_numbers_worked_out_by_hand():
    # shares 0.9/0.1 against 0.5/0.5: 0.4 ln(1.8) + 0.4 ln(5) = 0.878890...
    assert psi([50, 50], [90, 10], smoothing=0.0) == pytest.approx(
        0.4 * math.log(1.8) + 0.4 * math.log(5)
    )
    assert psi([1, 2, 3], [10, 20, 30], smoothing=0.0) == pytest.approx(0.0)
    assert psi([50, 50], [90, 10]) == pytest.approx(psi([90, 10], [50, 50]))  # symmetric
    # with 0.5 added to each bin: 50.5/101 = 0.5 against 90.5/101 and 10.5/101
    a = np.array([90.5, 10.5]) / 101
    assert psi([50, 50], [90, 10]) == pytest.approx(float(np.sum((a - 0.5) * np.log(a / 0.5))))


def test_an_empty_bin_gives_a_large_finite_psi_not_infinity():
    assert smoothed_shares([0, 10], 0.5).tolist() == pytest.approx([0.5 / 11, 10.5 / 11])
    value = psi([100, 0], [50, 50])
    assert math.isfinite(value) and value > 2
    with pytest.raises(ValueError):
        psi([1, 2], [1, 2, 3])


def test_confidence_bins_hold_their_lower_edge_and_one_is_in_the_last():
    edges = CONFIDENCE_EDGES
    values = np.array([0.0, 0.2999, 0.3, 0.95, 0.9899, 0.99, 1.0])
    assert confidence_bins(values, edges).tolist() == [0, 0, 1, 8, 8, 9, 9]
    assert confidence_counts(values, edges) == (2, 1, 0, 0, 0, 0, 0, 0, 2, 2)


def test_the_rule_refuses_thresholds_that_cannot_work():
    with pytest.raises(UserError):
        DriftRule(unknown_factor=1.0)
    with pytest.raises(UserError):
        DriftRule(min_complaints=0)


# ------------------------------------------------------------------------------------ the rules


def test_a_tripled_desk_warns_and_the_same_mix_does_not():
    rule = DriftRule(min_complaints=200)
    same = judge_week(week(dict.fromkeys(DESKS, 100)), profile(), rule)
    assert same.judged and same.desk_psi == pytest.approx(0.0, abs=1e-9)
    assert same.warnings == ()
    # Card Fraud tripled: 300 of 600 against a quarter
    tripled = judge_week(week({**dict.fromkeys(DESKS, 100), "Card Fraud": 300}), profile(), rule)
    assert tripled.desk_psi > 0.2
    assert [w.kind for w in tripled.warnings] == [DESK_MIX]
    assert "PSI" in tripled.warnings[0].message and "0.2" in tripled.warnings[0].message


def test_a_confidence_shift_warns_on_the_confidence_figure_alone():
    shifted = judge_week(week(dict.fromkeys(DESKS, 100), top_share=0.5), profile(), DriftRule())
    assert shifted.confidence_psi > 0.2
    assert [w.kind for w in shifted.warnings] == [CONFIDENCE]


def test_too_few_complaints_or_validation_rows_are_shown_but_never_judged():
    tiny = week({"Card Fraud": 50})  # 50 complaints, all one desk: PSI is huge
    result = judge_week(tiny, profile(), DriftRule(min_complaints=200))
    assert result.desk_psi > 1 and not result.judged and result.warnings == ()
    small_validation = judge_week(week({"Card Fraud": 600}), profile(rows=40), DriftRule())
    assert not small_validation.judged and small_validation.warnings == ()
    none = judge_week(week({"Card Fraud": 600}), None, DriftRule())
    assert none.desk_psi is None and none.confidence_psi is None and not none.judged


def test_the_unknown_desk_warning_needs_double_the_share_and_a_minimum_count():
    rule = DriftRule(min_complaints=200, min_unknown=10)
    base = profile(unknown=0.05)  # double: 10%
    mix = dict.fromkeys(DESKS, 100)  # 400 complaints

    def kinds(unknown: int, desks: dict[str, int] = mix) -> list[str]:
        return [w.kind for w in judge_week(week(desks, unknown=unknown), base, rule).warnings]

    assert kinds(40) == [UNKNOWN_DESK]  # 10.0%: exactly double
    assert kinds(39) == []  # 9.75%
    assert kinds(9, dict.fromkeys(DESKS, 50)) == []  # 4.5%, and under ten
    # 1 of 3 is a third, far over double, yet no signal: too few complaints and too few unknown
    assert kinds(1, {"Card Fraud": 3}) == []
    assert kinds(10, dict.fromkeys(DESKS, 20)) == []  # 12.5% of 80: the week is too small
    message = judge_week(week(mix, unknown=40), base, rule).warnings[0].message
    assert "10.0%" in message and "5.0%" in message and "40 of 400" in message


# ---------------------------------------------------------------------------- the profile


def test_the_validation_profile_counts_what_the_policy_flags():
    probs = np.array([[0.9, 0.1], [0.2, 0.8], [0.55, 0.45], [0.35, 0.65]])
    reasons = np.array(["", "", "unsure", "unknown desk"])
    made = validation_profile(probs, ["A", "B"], reasons, has_unknown_score=True)
    assert made.rows == 4 and made.desk_counts == {"A": 2, "B": 2}
    assert made.unknown_share == 0.25 and made.review_share == 0.5
    assert made.confidence_counts == confidence_counts(np.array([0.9, 0.8, 0.55, 0.65]))
    assert ValidationProfile.from_card({"validation_profile": made.to_json()}) == made
    none = validation_profile(probs, ["A", "B"], reasons, has_unknown_score=False)
    assert none.unknown_share is None


def test_an_old_card_has_no_profile_and_a_damaged_one_is_one_line():
    assert ValidationProfile.from_card({"labels": ["A"]}) is None
    old = card_baseline("old", "d1", {"labels": ["A"]})
    assert old.profile is None and "saved before validation profiles" in old.missing
    damaged = card_baseline("bad", "d2", {"validation_profile": {"rows": 3}})
    assert damaged.profile is None and "damaged" in damaged.missing
    with pytest.raises(UserError, match="damaged"):
        ValidationProfile.from_card({"validation_profile": {**profile().to_json(), "rows": 0}})


def test_a_trained_model_saves_its_validation_profile(tiny_model_dir: Path):
    card = json.loads((tiny_model_dir / "card.json").read_text(encoding="utf-8"))
    saved = ValidationProfile.from_card(card)
    assert saved is not None
    assert saved.rows == 8  # the tiny model's validation rows (a quarter of 32)
    assert sum(saved.confidence_counts) == 8 and sum(saved.desk_counts.values()) == 8
    assert set(saved.desk_counts) == set(card["labels"])
    assert saved.unknown_share is not None and 0 <= saved.review_share <= 1


# ------------------------------------------------------------------------------- the report


def stream(n_per_day: dict[str, int], desk_of=lambda i: DESKS[i % 4]):
    """One complaint row per arrival: days, channels (web / branch), desks, reasons, confidence
    (as the validation rows of `profile`: one in ten at 0.92 and unsure, the rest at 0.995)."""
    days, channels, desks, reasons, confidence = [], [], [], [], []
    for day, n in n_per_day.items():
        for i in range(n):
            days.append(day)
            channels.append("web" if i % 3 else "branch")
            desks.append(desk_of(i))
            reasons.append("unsure" if i % 10 == 0 else "")
            confidence.append(0.92 if i % 10 == 0 else 0.995)
    return days, channels, desks, reasons, [True] * len(days), confidence


def test_the_report_counts_days_by_channel_and_desk_and_judges_the_current_week():
    base = Baseline("live", "d", profile())
    groups = group_rows(*stream({"2026-05-05": 30, "2026-05-12": 300}))
    report = build_report(groups, base, None, since=SINCE, now=NOW)
    assert [d.day for d in report.days] == ["2026-05-05", "2026-05-12"]
    first = report.days[0]
    assert first.complaints == 30 and first.by_channel == {"branch": 10, "web": 20}
    assert first.by_desk == {"Card Fraud": 8, "KYC Update": 8, "Loan Query": 7, "UPI Dispute": 7}
    assert first.review == 3 and report.review == 33 and report.complaints == 330
    assert [w.counts.week for w in report.weeks] == ["2026-W19", "2026-W20"]
    assert [w.judged for w in report.weeks] == [False, True]
    assert report.current is report.weeks[1]
    assert report.current.counts.confidence_counts[-3:] == (30, 0, 270)
    assert report.current.confidence_psi == pytest.approx(
        psi(profile().confidence_counts, report.current.counts.confidence_counts)
    )
    assert report.current.confidence_psi < 0.01 and report.current.desk_psi < 0.01
    assert report.warnings == ()
    document = report.to_json()
    assert document["current_week"] == "2026-W20" and document["warnings"] == []
    assert document["confidence"]["live"] == list(report.confidence_counts)
    assert document["days"][0]["review_share"] == pytest.approx(0.1)


def test_a_shifted_week_warns_and_the_warning_outlives_the_week_by_one_week_only():
    base = Baseline("live", "d", profile())
    groups = group_rows(*stream({"2026-05-12": 400}, desk_of=lambda i: "Card Fraud"))
    report = build_report(groups, base, None, since=SINCE, now=NOW)
    assert [w.kind for w in report.warnings] == [DESK_MIX]
    next_week = datetime(2026, 5, 19, tzinfo=UTC)  # the Tuesday after: last week still speaks
    assert build_report(groups, base, None, since=SINCE, now=next_week).warnings != ()
    later = datetime(2026, 5, 26, tzinfo=UTC)
    assert build_report(groups, base, None, since=SINCE, now=later).warnings == ()


def test_complaints_of_another_model_count_per_day_but_not_toward_drift():
    days, channels, desks, reasons, _, conf = stream({"2026-05-12": 400})
    other = [False] * len(days)
    report = build_report(group_rows(days, channels, desks, reasons, other, conf),
                          Baseline("live", "d", profile()), None, since=SINCE, now=NOW)  # fmt: skip
    assert report.complaints == 400 and report.weeks == () and report.current is None


def test_without_a_baseline_the_counts_stay_and_the_comparisons_go():
    groups = group_rows(*stream({"2026-05-12": 400}, desk_of=lambda i: "Card Fraud"))
    base = Baseline("old", "d", None, "the live model old was saved before validation profiles")
    report = build_report(groups, base, None, since=SINCE, now=NOW)
    assert report.complaints == 400 and report.warnings == ()
    assert report.weeks[0].desk_psi is None
    document = report.to_json()
    assert document["confidence"]["validation"] is None
    assert "saved before" in document["baseline"]["missing"]


def test_rare_channels_are_counted_together():
    n = MAX_CHANNELS + 3
    channels = [f"ch{i:02d}" for i in range(n) for _ in range(n - i)]  # ch00 most frequent
    size = len(channels)
    groups = group_rows(["2026-05-12"] * size, channels, ["Card Fraud"] * size, [""] * size,
                        [True] * size, [0.9] * size)  # fmt: skip
    day = build_report(groups, Baseline(None, "", None), None, since=SINCE, now=NOW).days[0]
    assert len(day.by_channel) == MAX_CHANNELS + 1
    assert day.by_channel[OTHER_CHANNELS] == 3 + 2 + 1  # the three rarest
    assert sum(day.by_channel.values()) == size


def test_default_since_is_a_monday_seven_weeks_back():
    assert default_since(NOW) == datetime(2026, 3, 23, tzinfo=UTC)  # W13: W20 and seven before


def test_latency_percentiles_and_per_complaint_time():
    lat = latency_of([(10.0, 1), (20.0, 4), (30.0, 5), (None, 3), (5.0, 0)])
    assert lat is not None and lat.batches == 3 and lat.complaints == 10
    assert lat.p50_ms == 20.0 and lat.per_complaint_ms == pytest.approx(6.0)
    assert latency_of([]) is None


def test_the_cache_reuses_a_report_for_its_key_within_the_ttl():
    built: list[int] = []

    def build():
        built.append(1)
        return len(built)

    cache = MonitorCache(ttl_s=60)
    assert cache.get("a", build) == 1 and cache.get("a", build) == 1
    assert cache.get("b", build) == 2  # another baseline or window: built again
    assert MonitorCache(ttl_s=0).get("a", build) == 3


# -------------------------------------------------------------------- from the store itself


def routed(desk: str, confidence: float, reason: str = "") -> Routing:
    return Routing(desk, confidence, bool(reason), reason, 0.5, "transformer", {desk: confidence})


EDGE_VALUES = [0.0, 0.2999, 0.3, 0.5, 0.9, 0.9499, 0.95, 0.99, 1.0]


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "lens.db") as opened:
        yield opened


def test_the_store_groups_complaints_as_python_does_bin_edges_included(store: Store):
    token = create_token(store, "web", ["submit"], actor=OPERATOR).token
    items, rows = [], []
    for i, value in enumerate(EDGE_VALUES * 3):
        day = f"2026-05-{11 + i % 3:02d}"
        desk, reason = DESKS[i % 4], ("unknown desk" if i % 5 == 0 else "")
        received = datetime.fromisoformat(f"{day}T0{i % 9}:30:00+00:00")
        items.append((Submission(f"c{i}", "text", ["web", "app"][i % 2], "", received),
                      routed(desk, value, reason)))  # fmt: skip
        rows.append((day, ["web", "app"][i % 2], desk, reason, i % 7 != 0, value))
    store_batch(store, token, items[::7], model=("other", "x"), tat=load_tat(), route_ms=12.0)
    kept = [item for i, item in enumerate(items) if i % 7]
    store_batch(store, token, kept, model=("live", "d"), tat=load_tat(), route_ms=30.0)
    base = Baseline("live", "d", profile())
    from_store = read_groups(store, SINCE, base)
    by_python = group_rows(*[list(c) for c in zip(*rows, strict=True)])
    assert sorted(from_store, key=repr) == sorted(by_python, key=repr)
    report = read_monitor(store, base, since=SINCE, now=NOW)
    assert report.complaints == len(items)
    assert report.weeks[0].counts.complaints == len(kept)
    assert report.latency is not None and report.latency.batches == 2
    assert report.latency.per_complaint_ms == pytest.approx((12.0 + 30.0) / len(items))
    assert read_groups(store, datetime(2026, 5, 12, tzinfo=UTC), base)  # a later start: fewer
    assert sum(g.count for g in read_groups(store, datetime(2026, 5, 13, tzinfo=UTC), base)) == 9


def test_batches_stored_without_a_routing_time_have_no_latency(store: Store):
    token = create_token(store, "web", ["submit"], actor=OPERATOR).token
    store_batch(store, token, [(Submission("a", "t"), routed("Card Fraud", 0.9))],
                model=("live", "d"), tat=load_tat())  # fmt: skip
    assert read_latency(store, SINCE) is None
    details = json.loads(store.query("SELECT details FROM trail WHERE action = ?",
                                     ("intake.accepted",))[0][0])  # fmt: skip
    assert "route_ms" not in details


def test_the_live_baseline_reads_the_promoted_models_card(store: Store, tiny_model_dir: Path):
    root = tiny_model_dir.parent
    assert live_baseline(store, root).missing.startswith("no model is live")
    promote_model(store, root, tiny_model_dir.name, reason="test", actor=OPERATOR)
    live = live_baseline(store, root)
    assert live.model == tiny_model_dir.name and live.profile is not None and live.missing == ""


# ------------------------------------------------------------------------------- the charts


def test_the_charts_show_the_reports_numbers_and_export_as_pictures():
    from core.charts.export import chart_spec, spec_svg
    from core.charts.monitor import (
        confidence_chart,
        confidence_frame,
        daily_chart,
        daily_frame,
        drift_chart,
        shares_chart,
        shares_frame,
        weeks_frame,
    )

    groups = group_rows(*stream({"2026-05-05": 30, "2026-05-12": 300}))
    report = build_report(groups, Baseline("live", "d", profile()), None, since=SINCE, now=NOW)
    channels = daily_frame(report, "channel")
    assert channels.groupby("channel")["complaints"].sum().to_dict() == {"branch": 110, "web": 220}
    shares = shares_frame(report).set_index(["share"]).loc["sent to people", "value"].tolist()
    assert shares == pytest.approx([0.1, 0.1])
    confidence = confidence_frame(report)
    live = confidence[confidence["rows"] == "complaints"]["share"].tolist()
    assert live[-3:] == pytest.approx([30 / 300, 0, 270 / 300])
    assert set(confidence["rows"]) == {"complaints", "validation rows"}
    weeks = weeks_frame(report)
    assert weeks["week"].tolist() == ["2026-W19", "2026-W20"]
    assert weeks["judged"].tolist() == ["too few", "yes"]
    for chart in (daily_chart(report, "desk"), shares_chart(report), confidence_chart(report),
                  drift_chart(report)):  # fmt: skip
        assert spec_svg(chart_spec(chart)).lstrip().startswith(b"<svg")
