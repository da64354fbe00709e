"""Start the app: `python -m ui.launch [streamlit options]` (what `make run` and the browser
tests use).

A server without sign-in listens on loopback only: any other address is refused here, before
the server starts or the intake API is started beside it (core.exposure). So is a sign-in whose
cookie secret could be guessed. The server itself is the same as with `streamlit run app.py`:
app.py's st.App checks the same rules again as it starts, answers only requests addressed to
an allowed host name (ui.hosts: DNS rebinding) and lists app.py's pages, never the legacy
pages/ folder (ui.entry); each page view checks them once more (ui.auth.current_actor).

`--with-api` (what `make run` passes) also starts the intake API (`python -m core serve`, on
127.0.0.1:8600 unless GRIEVANCE_LENS_API_PORT says otherwise) as a child process, which stops
with the app: one command, one Ctrl-C.
"""

import atexit
import os
import subprocess
import sys
from pathlib import Path

from streamlit.web import cli
from streamlit.web.server.app_discovery import discover_asgi_app

from core.errors import UserError
from core.exposure import host_rule, launch_refusal, read_launch, streamlit_folders

APP = Path(__file__).resolve().parent.parent / "app.py"


def launch_problem() -> str | None:
    """Why this launch must not start (one line), or None: a Streamlit that would not serve
    app.py's st.App (with its Host check), the launch's rules, and its host names (a malformed
    GRIEVANCE_LENS_ALLOWED_HOSTS), read from the command line, the environment and the TOML
    files before Streamlit reads them."""
    if not discover_asgi_app(APP).is_asgi_app:  # a Streamlit that would serve app.py unchecked
        return f"this Streamlit does not serve the st.App of {APP.name} (ui.entry); reinstall it"
    try:
        launch = read_launch(sys.argv[1:], os.environ, folders=streamlit_folders())
        refusal = launch_refusal(launch, os.environ)
        if refusal is None:
            host_rule(launch, os.environ)
        return refusal
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
    problem = launch_problem()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if with_api:
        start_api()
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
