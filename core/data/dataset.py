"""The cleaned data set (`Dataset`: texts, labels, spreadsheet rows, other columns), its
fingerprint, evaluation slices, the stratified, seeded train/validation split, and the text keys
that say which complaints a model trained on (`text_key`, `split_record`, `split_inheriting`)."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import pandas as pd
from sklearn.model_selection import train_test_split

from core.data.limits import DataError


@dataclass(frozen=True)
class Dataset:
    """Cleaned complaints: texts (n,), labels (n,), their spreadsheet rows (n,), and the other
    original columns of those rows in `extra` (n rows, index 0..n-1).

    Lists are accepted and stored as tuples; `rows` defaults to 2..n+1 and `extra` to no columns.
    """

    texts: tuple[str, ...]
    labels: tuple[str, ...]
    rows: tuple[int, ...] | None = None
    extra: pd.DataFrame | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.texts)
        rows = tuple(range(2, n + 2)) if self.rows is None else self.rows
        extra = pd.DataFrame(index=pd.RangeIndex(n)) if self.extra is None else self.extra
        extra = extra.reset_index(drop=True)
        object.__setattr__(self, "texts", tuple(self.texts))
        object.__setattr__(self, "labels", tuple(self.labels))
        object.__setattr__(self, "rows", tuple(int(r) for r in rows))
        object.__setattr__(self, "extra", extra)
        if not len(self.labels) == len(self.rows) == len(extra) == n:
            raise DataError(
                f"Dataset needs equally long texts ({n}), labels ({len(self.labels)}), rows "
                f"({len(self.rows)}) and extra ({len(extra)})"
            )

    def __len__(self) -> int:
        return len(self.texts)

    @property
    def classes(self) -> tuple[str, ...]:
        """The distinct labels, sorted."""
        return tuple(sorted(set(self.labels)))

    @cached_property
    def fingerprint(self) -> str:
        """sha256 hex digest of the (row, text, label) triples in order; the same in every run.

        Rows are part of it, so removing a blank line from the file (which moves every later
        complaint up one spreadsheet row) makes another data set, and decisions saved by row
        number never land on a neighbouring complaint.
        """
        return _digest([row, text, label] for row, text, label in self._triples())

    @cached_property
    def legacy_fingerprint(self) -> str:
        """The fingerprint before rows were part of it (text and label only): used only to find
        review decisions saved under it, which `core.review.relabel.carry_over` re-checks."""
        return _digest([text, label] for _, text, label in self._triples())

    def _triples(self) -> Iterator[tuple[int, str, str]]:
        return zip(self.rows, self.texts, self.labels, strict=True)

    def subset(self, indices: Sequence[int]) -> Dataset:
        """The rows at positions `indices` (k,), in that order."""
        positions = [int(i) for i in indices]
        if any(not 0 <= i < len(self) for i in positions):
            raise DataError(f"subset positions must lie in 0..{len(self) - 1}")
        return Dataset(
            texts=tuple(self.texts[i] for i in positions),
            labels=tuple(self.labels[i] for i in positions),
            rows=tuple(self.rows[i] for i in positions),
            extra=self.extra.iloc[positions].reset_index(drop=True),
        )

    def to_frame(self) -> pd.DataFrame:
        """Columns row, text, label, then the extra columns: the cleaned data set for download."""
        columns = {"row": list(self.rows), "text": list(self.texts), "label": list(self.labels)}
        base = pd.DataFrame(columns)
        clash = {c: f"{c}_original" for c in self.extra.columns if c in base.columns}
        extra = self.extra.rename(columns=clash).reset_index(drop=True)
        return pd.concat([base, extra], axis=1)


def _digest(records: Iterable[list]) -> str:
    digest = hashlib.sha256()
    for record in records:
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


SLICE_COLUMN = "slice"  # optional column naming evaluation slices, e.g. the demo's "twin" rows
TWIN_SLICE = "twin"  # the demo data's word-order twins: same bag of words, other desk


def slice_names(dataset: Dataset) -> list[str]:
    """The `slice` value of every row ("" where empty or when the column is absent), (n,)."""
    if SLICE_COLUMN not in dataset.extra.columns:
        return [""] * len(dataset)
    return dataset.extra[SLICE_COLUMN].fillna("").astype(str).tolist()


def slice_rows(dataset: Dataset, name: str) -> list[int]:
    """Positions of the rows whose `slice` column equals `name` (empty without that column)."""
    return [i for i, value in enumerate(slice_names(dataset)) if value == name]


def split_dataset(
    dataset: Dataset, *, val_fraction: float = 0.2, seed: int = 0
) -> tuple[Dataset, Dataset]:
    """Stratified (train, validation) split; labels with a single row go to train.

    Deterministic for a given `seed`; both parts keep the original row order.
    """
    if (
        isinstance(val_fraction, bool)
        or not isinstance(val_fraction, (int, float))
        or not (0 < val_fraction <= 0.5)
    ):
        raise DataError(f"val_fraction must be above 0 and at most 0.5, got {val_fraction!r}")
    counts = Counter(dataset.labels)
    singles = [i for i, label in enumerate(dataset.labels) if counts[label] == 1]
    pool = [i for i, label in enumerate(dataset.labels) if counts[label] > 1]
    try:
        train, val = train_test_split(
            pool,
            test_size=val_fraction,
            random_state=seed,
            stratify=[dataset.labels[i] for i in pool],
        )
    except ValueError as exc:
        raise DataError(
            f"cannot hold out a stratified {val_fraction:.0%} validation set from {len(pool)} "
            f"rows with {len(set(dataset.labels))} labels ({exc}); add rows or change the "
            "validation fraction"
        ) from exc
    return dataset.subset(sorted([*singles, *train])), dataset.subset(sorted(val))


# Hex digits written as the letters a-p: a card's keys then hold no run of digits that reads
# like an account or card number to someone checking a saved model for personal data.
_HEX_AS_LETTERS = str.maketrans("0123456789abcdef", "abcdefghijklmnop")
_LETTERS_AS_HEX = str.maketrans("abcdefghijklmnop", "0123456789abcdef")


def text_key(text: str) -> str:
    """The first 64 bits of the SHA-256 of `text` with its whitespace collapsed, as 16 letters
    a-p: what identifies a complaint across data sets and versions (a relabelled row keeps its
    key). Among a million complaints the chance that two keys collide is about 3 in 100 million."""
    flat = " ".join(str(text).split())
    return hashlib.sha256(flat.encode("utf-8")).hexdigest()[:16].translate(_HEX_AS_LETTERS)


def _key_share(key: str) -> float:
    """Where `key` falls in [0, 1): uniform over complaints, the same in every run."""
    return int(key[:8].translate(_LETTERS_AS_HEX), 16) / 2**32


def split_record(train: Dataset, val: Dataset) -> dict[str, list]:
    """Which rows a model trained and validated on, for its card: spreadsheet rows and text keys
    of each part. The keys let a comparison find rows that neither of two models trained on, even
    in another version of the data set or another file."""
    return {
        "train_rows": list(train.rows),
        "validation_rows": list(val.rows),
        "train_keys": sorted({text_key(t) for t in train.texts}),
        "validation_keys": sorted({text_key(t) for t in val.texts}),
    }


def split_inheriting(
    dataset: Dataset,
    *,
    train_keys: Iterable[str],
    validation_keys: Iterable[str],
    val_fraction: float,
) -> tuple[Dataset, Dataset]:
    """(train, validation) of a new version of a data set that keeps an earlier model's split:
    a complaint that model held out stays held out (so the two can be compared on rows neither
    trained on), one it trained on stays in training (also when a duplicate was held out), and
    a new complaint goes to validation when its key falls in the first `val_fraction` of the
    range (stable: the same complaint lands on the same side in every later version). Both
    parts keep the original row order."""
    if not 0 < val_fraction <= 0.5:
        raise DataError(f"val_fraction must be above 0 and at most 0.5, got {val_fraction!r}")
    held_out, trained = set(validation_keys), set(train_keys)
    train_at, val_at = [], []
    for position, text in enumerate(dataset.texts):
        key = text_key(text)
        # A complaint the model trained on (a duplicate may also have been held out) stays in
        # training: a comparison drops it anyway, as one of the model's training rows.
        held = key in held_out or _key_share(key) < val_fraction
        (train_at if key in trained or not held else val_at).append(position)
    if not train_at or not val_at:
        raise DataError(
            f"the inherited split leaves {len(train_at)} training and {len(val_at)} validation "
            "rows; train from scratch on this data set instead"
        )
    return dataset.subset(train_at), dataset.subset(val_at)
