"""The routing board: each desk's open complaints against its turnaround time (TAT) from the
regulator's circulars, the complaints most at risk of breaching it, and what rerouting the unsure
ones would change. The TAT file (`tat`), received times (`received`), the board (`board`) and its
what-if (`whatif`); everything testable without Streamlit."""
