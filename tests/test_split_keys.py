"""Text keys and inherited splits: which complaints a model trained on, found again in a later
version of its data set (core.data.dataset.text_key, split_record, split_inheriting)."""

import pytest

from core.data.dataset import split_dataset, split_inheriting, split_record, text_key
from core.data.limits import DataError
from tests.conftest import make_dataset, separable_rows


def test_a_text_key_ignores_whitespace_but_not_words():
    assert text_key("UPI  payment\nfailed ") == text_key("UPI payment failed")
    assert text_key("UPI payment failed") != text_key("payment UPI failed")
    assert len(text_key("x")) == 16 and set(text_key("x")) <= set("abcdefghijklmnop")


def test_the_split_record_names_rows_and_keys_of_each_part():
    data = make_dataset(*separable_rows(10))
    train, val = split_dataset(data, val_fraction=0.2, seed=0)
    record = split_record(train, val)
    assert record["train_rows"] == list(train.rows) and record["validation_rows"] == list(val.rows)
    assert set(record["validation_keys"]) == {text_key(t) for t in val.texts}
    assert not set(record["train_keys"]) & set(record["validation_keys"])


def test_an_inherited_split_keeps_held_out_rows_held_out_and_places_new_rows_stably():
    data = make_dataset(*separable_rows(10))
    train, val = split_dataset(data, val_fraction=0.2, seed=0)
    record = split_record(train, val)
    # The next version: one held-out row relabelled, one training row dropped, 40 new rows.
    texts, labels = list(data.texts), list(data.labels)
    relabelled = data.texts.index(val.texts[0])
    labels[relabelled] = "Other"
    dropped = data.texts.index(train.texts[0])
    del texts[dropped], labels[dropped]
    new = [f"new complaint number {i} about a failed transfer" for i in range(40)]
    version = make_dataset(texts + new, labels + ["UPI Dispute"] * 40)
    keys = {"train_keys": record["train_keys"], "validation_keys": record["validation_keys"]}
    next_train, next_val = split_inheriting(version, **keys, val_fraction=0.2)
    assert set(val.texts) <= set(next_val.texts)  # held out before: held out now, relabel too
    assert set(next_train.texts) - set(new) == set(train.texts) - {train.texts[0]}
    new_held = set(next_val.texts) & set(new)
    assert 0 < len(new_held) < 40  # about a fifth, chosen by key hash
    again = split_inheriting(version, **keys, val_fraction=0.2)[1]
    assert set(again.texts) == set(next_val.texts)  # the same complaint, the same side


def test_an_inherited_split_with_an_empty_side_is_refused():
    data = make_dataset(*separable_rows(3))
    keys = [text_key(t) for t in data.texts]
    with pytest.raises(DataError, match="train from scratch"):
        split_inheriting(data, train_keys=[], validation_keys=keys, val_fraction=0.2)


def test_a_complaint_on_both_sides_of_the_old_split_stays_in_training():
    data = make_dataset(
        ["same text", "same text", "other text", "third text"], ["A", "A", "B", "B"]
    )
    key = text_key("same text")
    train, val = split_inheriting(
        data, train_keys=[key], validation_keys=[key, text_key("other text")], val_fraction=0.2
    )
    assert "same text" not in val.texts and "other text" in val.texts
