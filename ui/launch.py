"""Start the app: `python -m ui.launch [streamlit options]` (what `make run` and the browser
tests use).

Streamlit treats a `pages/` folder beside the entry point as a legacy multipage app until some
session has run `st.navigation`, so the first visitor of a deep link such as /train after a
restart would get the page without its frame. app.py lists its pages explicitly, so the
legacy mode is switched off before the server starts.
"""

import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

APP = Path(__file__).resolve().parent.parent / "app.py"


def main() -> int:
    PagesManager.uses_pages_directory = False
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
