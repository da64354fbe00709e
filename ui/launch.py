"""Start the app: `python -m ui.launch [streamlit options]` (what `make run` and the browser
tests use).

Streamlit treats a `pages/` folder beside the entry point as a legacy multipage app until some
session has run `st.navigation`, so the first visitor of a deep link such as /train after a
restart would get the page without its frame. app.py lists its pages explicitly, so the
legacy mode is switched off before the server starts.

A server without sign-in listens on loopback only: any other address is refused here, before
the server starts (core.exposure; app.py applies the same rule again at run time). So is a
sign-in whose cookie secret could be guessed. The server answers only requests addressed to an
allowed host name (ui.hosts: DNS rebinding).
"""

import os
import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

from core.errors import UserError
from core.exposure import HostRule, host_rule, launch_refusal, read_launch
from ui.hosts import install_host_check

APP = Path(__file__).resolve().parent.parent / "app.py"


def streamlit_folders() -> list[Path]:
    """The .streamlit folders Streamlit reads, lowest precedence first: the user's, the working
    directory's, and the one beside app.py."""
    folders = [Path.home() / ".streamlit", Path.cwd() / ".streamlit", APP.parent / ".streamlit"]
    return list(dict.fromkeys(folder.resolve() for folder in folders))


def checked_launch() -> HostRule | str:
    """The host names this launch answers to, or why it must not start (one line)."""
    try:
        launch = read_launch(sys.argv[1:], os.environ, folders=streamlit_folders())
        return launch_refusal(launch, os.environ) or host_rule(launch, os.environ)
    except UserError as exc:
        return str(exc)


def main() -> int:
    checked = checked_launch()
    if isinstance(checked, str):
        print(f"error: {checked}", file=sys.stderr)
        return 2
    install_host_check(checked)
    PagesManager.uses_pages_directory = False
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
