"""Pictures of the trained order models (core.lab.order_models): the table of their accuracy
on held-out word-order twins and the chart of each one's time per complaint as complaints grow.

Builders return a DataFrame or an alt.Chart; the Attention lab page shows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import altair as alt
import pandas as pd

if TYPE_CHECKING:
    from core.lab.order_models import OrderModels

TIMING_COLUMNS = ("model", "tokens", "ms_per_complaint")


def order_model_scores_table(models: OrderModels) -> pd.DataFrame:
    """One row per model: accuracy on the held-out rows, accuracy on the held-out twin rows
    (same bag of words, another desk), how many twin rows, and its training time."""
    return pd.DataFrame(
        {
            "model": [s.name for s in models.scores],
            "accuracy": [s.accuracy for s in models.scores],
            "twin accuracy": [s.twin_accuracy for s in models.scores],
            "twin rows": [s.twin_rows for s in models.scores],
            "train seconds": [s.train_seconds for s in models.scores],
        }
    )


def time_per_complaint_chart(table: pd.DataFrame) -> alt.Chart:
    """Milliseconds per complaint against its length in tokens, one line per model, both axes
    logarithmic (lengths double; a model whose cost grows with n climbs one step per doubling).

    `table` has the columns model, tokens, ms_per_complaint
    (core.lab.order_models.OrderModelTiming.table).
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
            color=alt.Color("model:N", title="model"),
            tooltip=[
                "model:N",
                "tokens:Q",
                alt.Tooltip("ms_per_complaint:Q", format=".3f", title="ms per complaint"),
            ],
        )
        .properties(height=300)
    )
