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

`--with-api` (what `make run` passes) also starts the intake API (`python -m core serve`, on
127.0.0.1:8600 unless GRIEVANCE_LENS_API_PORT says otherwise) as a child process, which stops
with the app: one command, one Ctrl-C.
"""

import atexit
import os
import subprocess
import sys
from pathlib import Path

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

from core.errors import UserError
from core.exposure import HostRule, host_rule, launch_refusal, read_launch, streamlit_folders
from ui.hosts import install_host_check

APP = Path(__file__).resolve().parent.parent / "app.py"


def checked_launch() -> HostRule | str:
    """The host names this launch answers to, or why it must not start (one line)."""
    try:
        launch = read_launch(sys.argv[1:], os.environ, folders=streamlit_folders())
        return launch_refusal(launch, os.environ) or host_rule(launch, os.environ)
    except UserError as exc:
        return str(exc)


WITH_API = "--with-api"
API_PORT_ENV = "GRIEVANCE_LENS_API_PORT"


def start_api() -> subprocess.Popen:
    """The intake API beside the app, stopped when the app's process exits."""
    port = os.environ.get(API_PORT_ENV, "8600")
    command = [sys.executable, "-m", "core", "serve", "--host", "127.0.0.1", "--port", port]
    child = subprocess.Popen(command, cwd=APP.parent)
    atexit.register(_stop, child)
    return child


def _stop(child: subprocess.Popen) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            child.kill()


def main() -> int:
    with_api = WITH_API in sys.argv[1:]
    sys.argv = [arg for arg in sys.argv if arg != WITH_API]
    checked = checked_launch()
    if isinstance(checked, str):
        print(f"error: {checked}", file=sys.stderr)
        return 2
    install_host_check(checked)
    if with_api:
        start_api()
    PagesManager.uses_pages_directory = False
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
