"""Streamlit helpers shared by the pages: session-state keys and safe rendering. UI only."""
