"""Train page: fine-tune a transformer and its bag of words; save, load, manage models."""

from __future__ import annotations

import streamlit as st

from ui.auth import current_actor
from ui.compare import render_challenger_section
from ui.retrain import render_retrain_section
from ui.saved_models import render_saved_models_section
from ui.state import get_active_model
from ui.train_form import render_training_section

st.title("Train")
st.write(
    "Build a transformer model on the active data set: a quick model in about a minute, or full "
    "fine-tuning for the best accuracy and word order. A bag of words is trained on "
    "the same split so the two can be compared. Or load a saved model."
)
actor = current_actor()
model = get_active_model()
render_saved_models_section(actor, model)
render_training_section(actor)
render_retrain_section(actor, model.path if model is not None else None)
render_challenger_section()
