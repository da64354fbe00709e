"""Triage queue page: a reviewer confirms or corrects the predictions the model was unsure about.

Classify puts every prediction whose confidence is below the review threshold into the queue
(core.review.triage.enqueue_uncertain). Verdicts are written to the review store at once.
Reviewed rows become training data by download: a labelled CSV of them, or the active data set
with them appended, which the Data page loads as it is (the session's data set is never changed
behind the reviewer's back). The waiting items are shown a page at a time, oldest first, and
every page can be reached, so a flood of queued items cannot hide the newest.

Complaints posted to the intake API that the live model was unsure of are triage items of batch
"inbox" (core.intake.inbox): while any waits, that batch is the one shown first, as "Arriving from
the intake API", the oldest due first with its channel, received time and due time
(core.intake.queue). The waiting list's heading and table redraw themselves every REFRESH_S
seconds (a fragment), so new arrivals appear without a click; the item picker and the verdict
form stay outside it, so a redraw never closes a list the reviewer has open (they follow at the
next click). Page-private session keys: "triage.batch", "triage.item" and "triage.page"
(widgets), "triage.last_save"."""

from __future__ import annotations

import math
import sqlite3

import pandas as pd
import streamlit as st

from core.access import Actor, Permission
from core.errors import UserError
from core.intake.inbox import INBOX_BATCH
from core.intake.queue import InboxTriageItem, inbox_triage, inbox_triage_count
from core.review.records import TriageItem
from core.review.store import Store
from core.review.triage import as_seen_by, triage_training_rows, with_training_rows
from ui.auth import allowed, current_actor
from ui.downloads import table_csv_bytes
from ui.errors import guarded
from ui.safe import md_escape
from ui.state import get_active_dataset
from ui.widgets import (
    SaveOutcome,
    remember_save,
    render_last_save,
    render_reviewer,
    require_store,
    shown_frame,
    shown_text,
)

ALL = "All batches"
BATCH_KEY = "triage.batch"
ITEM_KEY = "triage.item"
PAGE_KEY = "triage.page"
LAST_SAVE_KEY = "triage.last_save"
REFRESH_S = 5.0  # seconds between redraws of the waiting list (new arrivals from the API)
PAGE_SIZE = 200  # waiting items per page: a table one can scan; the pages reach every item
REVIEWED_LIMIT = 5000  # reviewed items listed (and offered as training rows), oldest first


def render_counts(counts: dict[str, int]) -> None:
    """Waiting, confirmed and corrected items, counted by the store (every item, not a page)."""
    cols = st.columns(3)
    cols[0].metric("Waiting", f"{counts['open']:,}")
    cols[1].metric("Confirmed", f"{counts['confirmed']:,}")
    cols[2].metric("Corrected", f"{counts['corrected']:,}")


def queue_frame(items: list[TriageItem]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "item": [i.id for i in items],
            "batch": [i.batch for i in items],
            "row": pd.array([i.row for i in items], dtype="Int64"),
            "text": [i.text for i in items],
            "predicted": [i.predicted_label for i in items],
            "decided by": [i.decided_by for i in items],
            "confidence": [i.confidence for i in items],
            "final": [i.final_label or "" for i in items],
            "status": [i.status for i in items],
            "reviewer": [i.reviewer or "" for i in items],
        }
    )


def render_table(items: list[TriageItem]) -> None:
    render_frame(queue_frame(items))


def render_frame(frame: pd.DataFrame) -> None:
    """A queue as a table: texts masked as the sidebar says, confidence to two places."""
    st.dataframe(
        shown_frame(frame),
        hide_index=True,
        width="stretch",
        height=260,
        column_config={
            "confidence": st.column_config.NumberColumn("confidence", format="%.2f"),
            "text": st.column_config.TextColumn("text", width="large"),
        },
    )


def inbox_frame(arrivals: list[InboxTriageItem]) -> pd.DataFrame:
    """The inbox's waiting complaints as listed: where and when each arrived, when it is due."""
    return pd.DataFrame(
        {
            "item": [a.item.id for a in arrivals],
            "complaint": [a.complaint_id for a in arrivals],
            "channel": [a.channel for a in arrivals],
            "received": [utc_minute(a.received_at) for a in arrivals],
            "due by": [utc_minute(a.due_by) for a in arrivals],
            "text": [a.item.text for a in arrivals],
            "predicted": [a.item.predicted_label for a in arrivals],
            "confidence": [a.item.confidence for a in arrivals],
            "source": [a.source for a in arrivals],
            "caller's id": [a.caller_id for a in arrivals],
        }
    )


def utc_minute(moment: str) -> str:
    """An ISO time of the inbox ("2025-06-01T20:00:00Z") to the minute: "2025-06-01 20:00 UTC"."""
    return f"{moment[:16].replace('T', ' ')} UTC"


def render_inbox_table(arrivals: list[InboxTriageItem]) -> None:
    render_frame(inbox_frame(arrivals))


def desk_options(item: TriageItem) -> list[str]:
    """The desks to choose from: the model's classes (most probable first), then the data set's."""
    ranked = sorted(item.probabilities, key=lambda label: -item.probabilities[label])
    active = get_active_dataset()
    extra = [c for c in (active.dataset.classes if active else ()) if c not in ranked]
    return ranked + extra or [item.predicted_label]


def render_item(
    item: TriageItem,
    open_ids: list[int],
    reviewer: str,
    store: Store,
    arrival: InboxTriageItem | None = None,
) -> None:
    """The complaint, the model's probabilities, and Confirm / Correct."""
    if arrival is not None:
        st.caption(
            f"Item #{item.id}: complaint {arrival.complaint_id} from "
            f"{md_escape(arrival.source)} (its id {md_escape(arrival.caller_id)}), channel "
            f"{md_escape(arrival.channel or 'not given')}, received "
            f"{utc_minute(arrival.received_at)}, due by {utc_minute(arrival.due_by)}"
        )
    else:
        where = f"row {item.row} of " if item.row is not None else ""
        st.caption(f"Item #{item.id}: {where}{md_escape(item.batch)}")
    st.text(shown_text(item.text))
    probabilities = pd.DataFrame(
        {"desk": list(item.probabilities), "probability": list(item.probabilities.values())}
    ).sort_values("probability", ascending=False)
    st.dataframe(
        probabilities,
        hide_index=True,
        column_config={
            "probability": st.column_config.ProgressColumn(
                "probability", format="%.2f", min_value=0.0, max_value=1.0
            )
        },
    )
    options = desk_options(item)
    with st.form(f"triage.decide.{item.id}"):
        st.selectbox("Correct desk (for a correction)", options, key=f"triage.label.{item.id}")
        left, right = st.columns(2)
        left.form_submit_button(
            f"Confirm {md_escape(item.predicted_label)}",
            type="primary",
            on_click=guarded(decide),
            args=(store, item, open_ids, reviewer, True),
        )
        right.form_submit_button(
            "Correct to the chosen desk",
            on_click=guarded(decide),
            args=(store, item, open_ids, reviewer, False),
        )


def decide(
    store: Store,
    item: TriageItem,
    open_ids: list[int],
    reviewer: str,
    confirm: bool,
) -> None:
    """Button callback: write the verdict (one transaction), then move on to the next item.

    The actor is resolved now, at the click, not taken from the run that drew the button: a
    role changed or removed since then applies to this click."""
    actor = current_actor()  # stops the run with a refusal when this user may no longer act
    label = item.predicted_label if confirm else st.session_state[f"triage.label.{item.id}"]
    try:
        done = store.decide_triage(item.id, final_label=label, reviewer=reviewer, actor=actor)
    except (UserError, sqlite3.Error) as exc:
        remember_save(LAST_SAVE_KEY, SaveOutcome(False, f"Not saved: {exc}"))
        return
    message = f"Saved: item #{done.id} {done.status} as {done.final_label}."
    remember_save(LAST_SAVE_KEY, SaveOutcome(True, message))
    # the next one down the list as shown (oldest first, or oldest due first), else the first
    later = open_ids[open_ids.index(item.id) + 1 :] if item.id in open_ids else []
    rest = [i for i in open_ids if i != item.id]
    if rest:
        st.session_state[ITEM_KEY] = (later or rest)[0]


def waiting_count(store: Store, batch: str | None) -> int:
    """How many items of `batch` (None: all) wait: the inbox's by its own count."""
    if batch == INBOX_BATCH:
        return inbox_triage_count(store)
    return store.triage_counts(batch=batch)["open"]


def waiting_items(
    store: Store, batch: str | None, offset: int
) -> tuple[list[TriageItem], dict[int, InboxTriageItem] | None]:
    """A page of `batch`'s waiting items from `offset` (oldest first; the inbox oldest due
    first), and for the inbox its complaints by item id (their channel and clock)."""
    if batch == INBOX_BATCH:
        arrivals = inbox_triage(store, limit=PAGE_SIZE, offset=offset)
        return [a.item for a in arrivals], {a.item.id: a for a in arrivals}
    return store.open_triage(batch=batch, limit=PAGE_SIZE, offset=offset), None


def page_offset(waiting: int, batch: str | None) -> int:
    """The offset of the page of `waiting` items the reviewer picked (0 on one page)."""
    order = "oldest due first" if batch == INBOX_BATCH else "oldest first"
    return (page_number(waiting, order) - 1) * PAGE_SIZE


def page_number(waiting: int, order: str) -> int:
    """The page of `waiting` items picked (1 when they fit on one page)."""
    pages = max(1, math.ceil(waiting / PAGE_SIZE))
    if st.session_state.get(PAGE_KEY, 1) > pages:  # items were decided or the batch changed
        st.session_state[PAGE_KEY] = pages
    page = 1
    if pages > 1:
        page = int(
            st.number_input(
                f"Page of the waiting items (1 to {pages:,}; {PAGE_SIZE} each, {order})",
                min_value=1,
                max_value=pages,
                step=1,
                key=PAGE_KEY,
            )
        )
    return page


def reviewed_items(store: Store, batch: str | None) -> list[TriageItem]:
    """Confirmed and corrected items of `batch` (or all), oldest first, up to REVIEWED_LIMIT."""
    decided = [
        item
        for status in ("confirmed", "corrected")
        for item in store.triage_items(batch=batch, status=status, limit=REVIEWED_LIMIT)
    ]
    return sorted(decided, key=lambda item: item.id or 0)[:REVIEWED_LIMIT]


def render_list(store: Store, batch: str | None, offset: int) -> None:
    """The waiting list's heading and table, redrawn every REFRESH_S seconds (a fragment): the
    inbox's complaints as arriving from the intake API (oldest due first), any other batch
    oldest first."""
    waiting = waiting_count(store, batch)
    items, arrivals = waiting_items(store, batch, offset)
    if batch == INBOX_BATCH:
        st.subheader(f"Arriving from the intake API ({waiting:,} waiting)")
        st.caption(
            "Complaints the bank's systems posted that the live model was unsure of, the oldest "
            "due first; new ones appear here by themselves. Times are UTC."
        )
    else:
        st.subheader(f"Waiting for review ({waiting:,})")
    if not items:
        st.info("Nothing is waiting for review.")
    elif arrivals is not None:
        render_inbox_table(list(arrivals.values()))
    else:
        render_table(items)


def render_picker(store: Store, batch: str | None, offset: int, reviewer: str | None) -> None:
    """The item to review and its verdict form (drawn with the page, not redrawn with the
    list: a redraw would close the desk list a reviewer has open)."""
    open_items, arrivals = waiting_items(store, batch, offset)
    if not open_items:
        return
    by_id = {i.id: i for i in open_items}
    if st.session_state.get(ITEM_KEY) not in by_id:
        st.session_state[ITEM_KEY] = open_items[0].id
    item_id = st.selectbox(
        "Item to review",
        list(by_id),
        key=ITEM_KEY,
        format_func=lambda i: (
            f"#{i}: {by_id[i].predicted_label} ({by_id[i].confidence:.0%}) · "
            f"{' '.join(shown_text(by_id[i].text).split())[:60]}"
        ),
    )
    if reviewer is not None:
        arrival = arrivals.get(item_id) if arrivals is not None else None
        render_item(by_id[item_id], list(by_id), reviewer, store, arrival)


def default_batch(store: Store, batches: list[str]) -> None:
    """The batch shown when the reviewer has not picked one: the inbox while any of it waits."""
    if BATCH_KEY not in st.session_state and INBOX_BATCH in batches and inbox_triage_count(store):
        st.session_state[BATCH_KEY] = INBOX_BATCH


def render_training_rows(reviewed: list[TriageItem], actor: Actor) -> None:
    """Reviewed rows as training data: a labelled file, or the active data set plus them."""
    include = st.radio(
        "Rows to add to the training data",
        ["confirmed and corrected", "corrected only"],
        key="triage.include",
        horizontal=True,
    )
    rows = triage_training_rows(
        reviewed, actor=actor, include_confirmed=include != "corrected only"
    )
    left, right = st.columns(2)
    left.download_button(
        f"Download {len(rows)} reviewed rows (CSV)",
        table_csv_bytes(rows),
        "triage-reviewed-rows.csv",
        "text/csv",
        key="triage.rows_csv",
        disabled=rows.empty,
    )
    active = get_active_dataset()
    if active is not None:
        right.download_button(
            f"Download {md_escape(active.name)} + {len(rows)} reviewed rows (CSV)",
            table_csv_bytes(with_training_rows(active.dataset, rows)),  # not deferred: ui.downloads
            "training-data-with-triage.csv",
            "text/csv",
            key="triage.combined_csv",
            disabled=rows.empty,
        )
    st.caption(
        "Both files have `text` and `label` columns and a `source` column saying where each row "
        "came from; load one on **Data** and train again to learn from the reviewed rows."
    )


st.title("Triage queue")
st.write(
    "Predictions the model was unsure about (confidence below the review threshold on "
    "Classify) wait here. Confirm the predicted desk or correct it; every verdict is saved at once."
)
actor = current_actor()
store = require_store()
render_counts(store.triage_counts())
batches = store.triage_batches()
default_batch(store, batches)
batch = st.selectbox("Batch", [ALL, *batches], key=BATCH_KEY)
chosen = None if batch == ALL else batch
render_last_save(LAST_SAVE_KEY)
reviewer = None
if allowed(actor, Permission.DECIDE, "Confirming or correcting predictions"):
    reviewer = render_reviewer("triage", prompt="Your name, saved with each verdict", actor=actor)
offset = page_offset(waiting_count(store, chosen), chosen)
st.fragment(render_list, run_every=REFRESH_S)(store, chosen, offset)
render_picker(store, chosen, offset, reviewer)
reviewed = as_seen_by(reviewed_items(store, chosen), actor)  # the trail's rule for names
st.subheader(f"Reviewed ({len(reviewed):,})")
if reviewed:
    render_table(reviewed)
    if allowed(actor, Permission.DECIDE, "Downloading reviewed rows as training data"):
        render_training_rows(reviewed, actor)
else:
    st.write("No verdicts yet.")
