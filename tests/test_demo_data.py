"""The built-in demo data: deterministic, varied, balanced, code-mixed, with a sound twin slice."""

import hashlib
import random
import re
from datetime import date, datetime, timedelta

import numpy as np
import pandas as pd
import pytest

from core import paths
from core.data.demo import CHANNELS, COLUMNS, DemoConfig, generate_demo_data, write_demo_data
from core.data.demo_phrases import DESKS, TWIN_PATTERNS
from core.data.demo_times import IST, is_holiday
from core.text import bag_key, words

HINDI_FUNCTION_WORDS = {
    "hai", "hain", "nahi", "ka", "ki", "ke", "mera", "mere", "meri", "gaya", "gayi", "ho", "se",
    "mein", "kar", "karo", "par", "hua", "tha", "kiya", "pe",
}  # fmt: skip
RUPEES = r"₹|\bRs\b|\bINR\b|\blakh\b|\brupees\b"
MASKED_CARD = (
    r"(?i)\bx{4}[ -]x{4}[ -]x{4}[ -]\d{4}\b|\*{4} \d{4}|\*{4} \*{4}|\bending \d{4}|\bXXXX\d{4}"
)
UPI_REFERENCE = r"\b\d{12}\b|@(?:okaxis|ybl|paytm|okhdfcbank|oksbi|okicici|ibl|axl|upi)\b"


@pytest.fixture(scope="module")
def demo() -> pd.DataFrame:
    return generate_demo_data()


def _share(mask: pd.Series) -> float:
    return float(mask.mean())


def test_same_seed_gives_identical_csv_bytes(tmp_path):
    config = DemoConfig(rows=400, seed=3)
    first = write_demo_data(tmp_path / "a.csv", config).read_bytes()
    second = write_demo_data(tmp_path / "b.csv", config).read_bytes()
    assert first == second
    assert first.startswith(
        b"complaint_id,channel,language,text,desk,slice,twin_group,received_at\n"
    )


def test_different_seed_gives_different_data(tmp_path):
    a = write_demo_data(tmp_path / "a.csv", DemoConfig(rows=400, seed=3)).read_bytes()
    b = write_demo_data(tmp_path / "b.csv", DemoConfig(rows=400, seed=4)).read_bytes()
    assert a != b


def test_numpy_integers_are_accepted_as_plain_numbers():
    a = generate_demo_data(DemoConfig(rows=np.int64(80), seed=np.int64(3)))
    assert a.equals(generate_demo_data(DemoConfig(rows=80, seed=3)))


def test_generation_leaves_the_global_random_state_alone():
    random.seed(123)
    before = random.getstate()
    generate_demo_data(DemoConfig(rows=60))
    assert random.getstate() == before


def test_default_size_columns_and_ids(demo):
    assert DemoConfig().rows == 3000
    assert len(demo) == 3000
    assert tuple(demo.columns) == COLUMNS
    assert demo["complaint_id"].iloc[0] == "GL-000001"
    assert demo["complaint_id"].is_unique
    assert demo["complaint_id"].str.fullmatch(r"GL-\d{6}").all()
    assert set(demo["channel"]) == set(CHANNELS)
    assert set(demo["language"]) == {"en", "hi-en"}
    assert set(demo["slice"]) == {"regular", "twin"}


@pytest.mark.parametrize("rows", [50, 51, 333])
def test_row_count_is_exact(rows):
    frame = generate_demo_data(DemoConfig(rows=rows, seed=rows))
    assert len(frame) == rows
    assert frame.groupby("twin_group")["text"].size().min() >= 2


def test_exactly_five_desks_roughly_balanced(demo):
    assert DESKS == ("UPI Dispute", "Card Fraud", "Loan Query", "KYC Update", "Other")
    shares = demo["desk"].value_counts(normalize=True)
    assert set(shares.index) == set(DESKS)
    assert shares.min() >= 0.10
    assert shares.max() <= 0.30
    assert shares["Other"] == shares.min()  # a bit smaller, as in a real inbox


def test_texts_are_distinct(demo):
    assert demo["text"].nunique() / len(demo) >= 0.95
    assert demo["text"].str.strip().str.len().min() > 0


def test_code_mixed_share_and_hindi_function_words(demo):
    code_mixed = demo["language"] == "hi-en"
    assert _share(code_mixed) >= 0.15
    hindi_counts = demo["text"].map(lambda t: len(HINDI_FUNCTION_WORDS & set(words(t))))
    assert (hindi_counts[code_mixed] >= 1).all()
    assert _share(hindi_counts[code_mixed] >= 2) >= 0.8
    assert _share(hindi_counts[~code_mixed] >= 2) <= 0.02
    assert demo.loc[code_mixed, "text"].nunique() >= 0.95 * code_mixed.sum()
    assert set(demo.loc[code_mixed, "desk"]) == set(DESKS)


def test_twin_slice_share_and_marking(demo):
    twins = demo["slice"] == "twin"
    assert _share(twins) >= 0.10
    assert demo.loc[twins, "twin_group"].notna().all()
    assert demo.loc[~twins, "twin_group"].isna().all()
    assert str(demo["twin_group"].dtype) == "Int64"


def _check_twin_groups(frame: pd.DataFrame) -> None:
    twins = frame[frame["slice"] == "twin"]
    for group_id, group in twins.groupby("twin_group"):
        assert len(group) >= 2, group_id
        assert group["text"].map(bag_key).nunique() == 1, list(group["text"])
        assert group["desk"].nunique() >= 2, list(group["text"])
        assert group["text"].nunique() == len(group)


def test_every_twin_group_shares_a_bag_and_spans_desks(demo):
    _check_twin_groups(demo)


def test_twin_guarantee_holds_when_most_rows_are_twins():
    frame = generate_demo_data(DemoConfig(rows=1200, seed=99, twin_share=0.5))
    assert _share(frame["slice"] == "twin") >= 0.49
    _check_twin_groups(frame)
    assert not _has_adjacent_twins(frame)


def test_there_are_many_twin_patterns(demo):
    assert len(TWIN_PATTERNS) >= 10
    twins = demo[demo["slice"] == "twin"]
    # Texts of one pattern share most of their words; count word-skeletons without digits.
    skeletons = twins["text"].map(lambda t: frozenset(w for w in words(t) if not w.isdigit()))
    assert skeletons.nunique() >= 50
    assert set(twins["desk"]) == set(DESKS)


def test_no_regular_text_equals_a_twin_text(demo):
    twin_texts = set(demo.loc[demo["slice"] == "twin", "text"])
    assert twin_texts.isdisjoint(demo.loc[demo["slice"] == "regular", "text"])


def _has_adjacent_twins(frame: pd.DataFrame) -> bool:
    groups = frame["twin_group"].reset_index(drop=True)
    same = groups.iloc[1:].reset_index(drop=True) == groups.iloc[:-1].reset_index(drop=True)
    return bool(same.fillna(False).any())


def test_twins_are_not_adjacent(demo):
    assert not _has_adjacent_twins(demo)


def test_texts_carry_realistic_banking_details(demo):
    text = demo["text"]
    assert _share(text.str.contains(RUPEES)) >= 0.30
    assert _share(text.str.contains(MASKED_CARD)) >= 0.08
    assert _share(text.str.contains(UPI_REFERENCE)) >= 0.08
    assert _share(text.str.contains(r"\bX{4,8}\d{4}\b")) >= 0.05  # masked account numbers
    for name in ("SBI", "HDFC Bank", "PhonePe", "Google Pay", "Paytm", "BHIM", "Dear Sir/Madam"):
        assert text.str.contains(name, regex=False).any(), name


def test_text_lengths_vary(demo):
    lengths = demo["text"].map(lambda t: len(words(t)))
    assert _share(lengths <= 8) >= 0.02
    assert _share(lengths >= 60) >= 0.05
    assert lengths.nunique() >= 50


def test_some_texts_have_typos_and_cross_desk_words(demo):
    text = demo["text"]
    assert text.str.contains(r"\b(?:recieved|amout|acount|transcation|refnd|paymnet)\b").any()
    kyc_with_card = (demo["desk"] == "KYC Update") & text.str.contains(r"(?i)\bcard\b")
    assert kyc_with_card.sum() >= 10


def test_code_mixing_and_twins_can_be_switched_off():
    frame = generate_demo_data(DemoConfig(rows=200, twin_share=0.0, codemix_share=0.0))
    assert set(frame["language"]) == {"en"}
    assert set(frame["slice"]) == {"regular"}
    assert frame["twin_group"].isna().all()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"rows": 49}, "rows"),
        ({"rows": 100.0}, "rows"),
        ({"seed": "7"}, "seed"),
        ({"twin_share": 0.6}, "twin_share"),
        ({"twin_share": -0.1}, "twin_share"),
        ({"codemix_share": 0.51}, "codemix_share"),
        ({"codemix_share": float("nan")}, "codemix_share"),
    ],
)
def test_invalid_config_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        generate_demo_data(DemoConfig(**changes))


def test_write_csv_round_trips(tmp_path):
    config = DemoConfig(rows=300, seed=5)
    path = write_demo_data(str(tmp_path / "demo.csv"), config)
    assert path == tmp_path / "demo.csv"
    read = pd.read_csv(path, dtype={"twin_group": "Int64"}, keep_default_na=False, na_values=[""])
    expected = generate_demo_data(config)
    assert list(read.columns) == list(COLUMNS)
    assert read["text"].tolist() == expected["text"].tolist()
    assert read["twin_group"].equals(expected["twin_group"])
    assert [p.name for p in tmp_path.iterdir()] == ["demo.csv"]


def test_write_xlsx_round_trips_and_is_reproducible(tmp_path):
    config = DemoConfig(rows=120, seed=5)
    first = write_demo_data(tmp_path / "a.xlsx", config)
    second = write_demo_data(tmp_path / "b.XLSX", config)
    assert first.read_bytes() == second.read_bytes()
    read = pd.read_excel(first, dtype={"twin_group": "Int64"})
    expected = generate_demo_data(config)
    assert list(read.columns) == list(COLUMNS)
    assert read["text"].tolist() == expected["text"].tolist()
    assert read["desk"].tolist() == expected["desk"].tolist()
    assert read["twin_group"].equals(expected["twin_group"])


@pytest.mark.parametrize("name", ["demo.txt", "demo.parquet", "demo"])
def test_write_refuses_other_suffixes(tmp_path, name):
    with pytest.raises(ValueError, match=re.escape("use .csv or .xlsx")):
        write_demo_data(tmp_path / name, DemoConfig(rows=60))
    assert list(tmp_path.iterdir()) == []


def test_write_refuses_a_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        write_demo_data(tmp_path / "missing" / "demo.csv", DemoConfig(rows=60))


def test_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(paths.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_demo_data(tmp_path / "demo.csv", DemoConfig(rows=60))
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- received times

FRIDAY = date(2026, 3, 6)  # the queue is cut at 00:00 IST on this day; Holi was Wednesday 4th


def _received(config: DemoConfig) -> pd.Series:
    return pd.to_datetime(generate_demo_data(config)["received_at"], format="ISO8601")


def _per_day(times: pd.Series) -> pd.Series:
    return times.dt.tz_convert(IST).dt.date.value_counts()


def test_received_times_leave_every_other_column_byte_identical():
    """The CSV of the other columns as the generator wrote them before received_at existed."""
    frame = generate_demo_data(DemoConfig(rows=400, seed=3)).drop(columns=["received_at"])
    digest = hashlib.sha256(frame.to_csv(index=False, lineterminator="\n").encode()).hexdigest()
    assert digest == "438feb4c1e32fc6368a626bb5babeed04540ac73f2501e920f1d1c608ae11ade"


def test_received_times_are_iso_with_the_india_offset_and_grow_with_the_id():
    frame = generate_demo_data(DemoConfig(rows=300, seed=2, received_until=FRIDAY))
    assert frame.columns[-1] == "received_at"
    assert frame["received_at"].str.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+05:30").all()
    times = [datetime.fromisoformat(t) for t in frame["received_at"]]
    assert times == sorted(times)
    anchor = datetime(2026, 3, 6, tzinfo=IST)
    assert max(times) < anchor and min(times) >= anchor - timedelta(days=21)


def test_received_times_are_deterministic_for_a_fixed_day():
    config = DemoConfig(rows=200, seed=4, received_until=FRIDAY)
    assert generate_demo_data(config).equals(generate_demo_data(config))
    later = generate_demo_data(DemoConfig(rows=200, seed=4, received_until=date(2026, 3, 7)))
    assert not later["received_at"].equals(generate_demo_data(config)["received_at"])
    assert later["text"].equals(generate_demo_data(config)["text"])


def test_received_times_default_to_the_queue_at_the_start_of_today_in_india():
    times = _received(DemoConfig(rows=60))
    today = datetime.now(IST).date()
    assert (times < pd.Timestamp(datetime(today.year, today.month, today.day), tz=IST)).all()


def test_received_times_follow_an_open_queue_of_working_days():
    times = _received(DemoConfig(rows=3000, seed=7, received_until=FRIDAY))
    per_day = _per_day(times)
    days = [FRIDAY - timedelta(days=k) for k in range(1, 22)]
    weekday = [per_day.get(d, 0) for d in days if d.weekday() < 5]
    weekend = [per_day.get(d, 0) for d in days if d.weekday() >= 5]
    assert sum(weekday) / len(weekday) > 2 * sum(weekend) / len(weekend)
    recent = times.dt.tz_convert(IST).dt.date >= FRIDAY - timedelta(days=3)
    assert recent.mean() >= 0.5  # an open queue: most complaints are a few days old
    assert per_day.get(FRIDAY - timedelta(days=21), 0) > 0  # with a tail of three weeks
    assert is_holiday(date(2026, 3, 4))  # Holi: quieter than the older Tuesday before it
    assert per_day[date(2026, 3, 4)] < per_day[date(2026, 3, 3)]
    hours = times.dt.tz_convert(IST).dt.hour
    assert ((hours >= 9) & (hours < 21)).mean() >= 0.8


def test_a_weekday_is_busier_than_a_sunday_as_recent():
    """The day before a Wednesday cut (a Tuesday) against the day before a Monday cut (a
    Sunday): the same recency, so only the weekday pattern differs."""
    tuesday = _per_day(_received(DemoConfig(rows=2000, received_until=date(2026, 3, 11))))
    sunday = _per_day(_received(DemoConfig(rows=2000, received_until=date(2026, 3, 9))))
    assert tuesday[date(2026, 3, 10)] > 2 * sunday[date(2026, 3, 8)]


@pytest.mark.parametrize("until", [datetime(2026, 3, 6), "2026-03-06", 20260306])
def test_received_until_must_be_a_date(until):
    with pytest.raises(ValueError, match="received_until must be a date"):
        generate_demo_data(DemoConfig(rows=60, received_until=until))
