"""Label audit page: find rows whose label looks wrong, decide each one, export the corrections.

The audit runs on the queue and its finished result is cached per server process (ui.audit_run);
every decision goes to the review store in one transaction and is shown as saved only after the
write returned (ui.audit_review); the corrected data set is built from the store (ui.audit_export);
the decisions and the trail follow (ui.audit_history). Page-private session keys, all "audit.":
"row" and "last_save" (ui.audit_review), "carry_over" (ui.audit_export)."""

import streamlit as st

from ui.audit_export import render_audit_export
from ui.audit_history import render_audit_history
from ui.audit_review import render_audit_review
from ui.audit_run import render_audit_run
from ui.auth import current_actor
from ui.datasets import require_dataset
from ui.widgets import require_store

st.title("Label audit")
st.write(
    "Find rows whose label looks wrong: a model trained without each row predicts it, and "
    "cleanlab flags as many rows as it estimates are mislabelled, most likely first, saying how "
    "many it expects to be real errors; identical texts with other labels are listed too. "
    "Decide each one; every decision is saved at once."
)
actor = current_actor()
active = require_dataset("audit")
if active is None:
    st.stop()
store = require_store()
result = render_audit_run(active, store, actor)
if result is not None:
    render_audit_review(active, result, store, actor)
st.subheader("Export and history")
render_audit_export(active, store, actor)
render_audit_history(active.dataset.fingerprint, store, actor)
