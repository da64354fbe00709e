"""Grievance Lens: the server's entry and the page script, however the server is started
(`python -m ui.launch`, `make run`, `streamlit run app.py`, `python -m streamlit run app.py`).

Streamlit reads this file before it serves anything; finding `app`, an st.App, it imports the
file as a module and serves that app, whose middleware refuses a forged Host (ui.entry). It then
runs the file as `__main__` for every page view: the router and frame (ui.frame)."""

import streamlit as st

if __name__ != "__main__":  # imported by Streamlit as the server's entry, before it serves
    from ui.entry import prepare_server

    app = st.App(__file__, middleware=prepare_server())
else:  # a page view
    from ui.frame import run

    run()
