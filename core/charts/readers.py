"""Pictures of the trained order readers (core.lab.order_readers): the table of their accuracy
on held-out word-order twins and the chart of each one's time per complaint as complaints grow.

Builders return a DataFrame or an alt.Chart; the Attention lab page shows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

if TYPE_CHECKING:
    from core.lab.order_readers import OrderReaders

TIMING_COLUMNS = ("reader", "tokens", "ms_per_complaint")


def reader_scores_table(readers: OrderReaders) -> pd.DataFrame:
    """One row per reader: accuracy on the held-out rows, accuracy on the held-out twin rows
    (same bag of words, another desk), how many twin rows, and its training time."""
    return pd.DataFrame(
        {
            "reader": [s.name for s in readers.scores],
            "accuracy": [s.accuracy for s in readers.scores],
            "twin accuracy": [s.twin_accuracy for s in readers.scores],
            "twin rows": [s.twin_rows for s in readers.scores],
            "train seconds": [s.train_seconds for s in readers.scores],
        }
    )


def time_per_complaint_chart(table: pd.DataFrame) -> alt.Chart:
    """Milliseconds per complaint against its length in tokens, one line per reader, both axes
    logarithmic (lengths double; a reader whose cost grows with n climbs one step per doubling).

    `table` has the columns reader, tokens, ms_per_complaint
    (core.lab.order_readers.ReaderTiming.table).
    """
    missing = [c for c in TIMING_COLUMNS if c not in table.columns]
    if missing:
        raise ValueError(f"timing table lacks the columns {missing}")
    frame = table.loc[:, list(TIMING_COLUMNS)]
    return (
        alt.Chart(frame, title="Time per complaint as complaints get longer")
        .mark_line(point=True)
        .encode(
            x=alt.X("tokens:Q", scale=alt.Scale(type="log", base=2), title="tokens per complaint"),
            y=alt.Y("ms_per_complaint:Q", scale=alt.Scale(type="log"), title="ms per complaint"),
            color=alt.Color("reader:N", title="reader"),
            tooltip=[
                "reader:N",
                "tokens:Q",
                alt.Tooltip("ms_per_complaint:Q", format=".3f", title="ms per complaint"),
            ],
        )
        .properties(height=300)
    )
