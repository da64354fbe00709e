"""Tables of order-probe, data-set-scan and positional-ablation results, only to be shown: one
DataFrame per result type for `st.dataframe`, and the per-desk counts behind `capped_chart`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from core.analysis.order_ablation import OrderAblation
from core.analysis.probe_compare import ProbeResult
from core.analysis.probe_scan import KindStats, OneRightRow, TwinGroup


def probe_table(result: ProbeResult) -> pd.DataFrame:
    """One row per perturbation: kind, bag kept, text, each model's desk, shift and flip."""
    rows = [
        {
            "kind": o.perturbation.kind,
            "same bag of words": o.perturbation.bag_unchanged,
            "text": o.perturbation.text,
            "transformer": o.neural.label,
            "transformer shift": o.neural_shift,
            "transformer flipped": o.neural_flipped,
            "bag of words": o.bow.label,
            "bag-of-words shift": o.bow_shift,
            "bag of words flipped": o.bow_flipped,
            "change": o.perturbation.note,
        }
        for o in result.outcomes
    ]
    return pd.DataFrame(rows)


def twin_table(groups: Sequence[TwinGroup]) -> pd.DataFrame:
    """One row per member of each twin group: group, spreadsheet row, desk, text."""
    rows = [
        {"group": g_index + 1, "row": row, "desk": label, "text": text}
        for g_index, g in enumerate(groups)
        for row, label, text in zip(g.rows, g.labels, g.texts, strict=True)
    ]
    return pd.DataFrame(rows, columns=["group", "row", "desk", "text"])


def one_right_table(rows: Sequence[OneRightRow]) -> pd.DataFrame:
    """Rows where one model is right: row, desk, both predictions and confidences, text."""
    records = [
        {
            "row": r.row,
            "desk": r.label,
            "transformer": r.neural.label,
            "transformer confidence": r.neural.confidence,
            "bag of words": r.bow.label,
            "bag-of-words confidence": r.bow.confidence,
            "text": r.text,
        }
        for r in rows
    ]
    columns = ["row", "desk", "transformer", "transformer confidence", "bag of words"]
    return pd.DataFrame(records, columns=columns + ["bag-of-words confidence", "text"])


def kind_stats_table(stats: Sequence[KindStats]) -> pd.DataFrame:
    """Flip rates and mean JS divergences per perturbation kind."""
    return pd.DataFrame(
        [
            {
                "kind": s.kind,
                "perturbations": s.count,
                "same bag of words": s.bag_unchanged_share,
                "transformer flip rate": s.neural_flip_rate,
                "bag-of-words flip rate": s.bow_flip_rate,
                "transformer mean JSD": s.neural_mean_jsd,
                "bag-of-words mean JSD": s.bow_mean_jsd,
            }
            for s in stats
        ]
    )


def capped_frame(groups: Sequence[TwinGroup]) -> pd.DataFrame:
    """Per desk: twin-group rows a bag of words can at best get right, and those it cannot.

    In each group the largest desk (first in sorted order on ties) is the best a bag-of-words
    model can do; every other member is out of its reach.
    """
    records = []
    for group in groups:
        counts = Counter(group.labels)
        best = min(counts, key=lambda d: (-counts[d], d))
        for desk, count in counts.items():
            status = "reachable at best" if desk == best else "out of reach for a bag of words"
            records.append({"desk": desk, "status": status, "rows": count})
    frame = pd.DataFrame(records, columns=["desk", "status", "rows"])
    return frame.groupby(["desk", "status"], as_index=False)["rows"].sum()


def order_ablation_table(result: OrderAblation) -> pd.DataFrame:
    """One row per variant: variant, label, then one probability column per label."""
    rows = [
        {"variant": v.variant, "label": v.prediction.label, **v.prediction.probabilities}
        for v in result.variants
    ]
    return pd.DataFrame(rows)
