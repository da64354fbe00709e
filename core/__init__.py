"""Grievance Lens core: every piece of logic, importable and testable without Streamlit."""
