"""What every Grievance Lens server is, however it is started: `python -m ui.launch` (`make
run`, the browser tests), `streamlit run app.py` or `python -m streamlit run app.py` (what
Streamlit's documentation, a container image or a platform runs).

The hook. Streamlit 1.67's `streamlit run FILE` first reads FILE for an ASGI app assigned at
module level (`app = st.App(...)`; streamlit.web.server.app_discovery, by parsing, not running
it). Finding one, it binds the socket, imports FILE as a module and serves that app with
uvicorn; the app runs FILE again as `__main__` for every page view. app.py holds such an `app`,
built with `prepare_server()` below, so in every start mode:

- this code runs at that import, which uvicorn completes before it answers any connection:
  nothing is served before the rule is in place;
- the Host check (ui.hosts) is middleware of the app Streamlit serves, outside every route
  Streamlit has: the page and its static files, /_stcore/health, /_stcore/host-config, media,
  uploads, components, and the /_stcore/stream WebSocket (closed before it is accepted, which
  uvicorn answers with 403);
- a server that must not start (core.exposure.launch_refusal: without sign-in off loopback, a
  guessable cookie secret, a roles file that does not load, a malformed
  GRIEVANCE_LENS_ALLOWED_HOSTS) stops with one line `error: ...` and status 2, as the launcher
  does before it starts Streamlit;
- the legacy pages/ mode is off, so the page list is app.py's st.navigation (ui.frame) from
  the first request on, never a listing of the files in pages/ (Streamlit assumes that mode
  for a pages/ folder beside the script until some session has run st.navigation: the page
  file names to anyone, and a deep link such as /train without its frame);
- SIGTERM and Ctrl-C stop the server gracefully and the process then ends as Python ends
  (status 0), running its exit hooks (the launcher's intake API child, the job queue's scratch
  folders of complaint tables), as under Streamlit's own server; uvicorn, which serves an
  st.App, raises the signal again once it has stopped, and a SIGTERM raised again kills the
  process before those hooks run.

The rule is read from Streamlit's own configuration as this server loaded it (server.address,
the secrets' [auth] section), as ui.auth.current_actor reads it again on every page view.

Why not the other ways. The launcher used to patch Streamlit's create_starlette_app before
starting it; nothing runs before `streamlit run app.py` starts its server but Streamlit, so that
patch cannot exist in that mode, and Streamlit has no setting, plugin or entry point that runs
project code at server creation. A check installed by the first page run comes after the
server has answered (static files, health, the WebSocket). Refusing `streamlit run app.py`
altogether would be the sound answer only without this hook; with it, both modes serve the same
app. Any other host of the ASGI app (`uvicorn app:app`, another ASGI server, mounting it) is
refused: there the address it listens on is not Streamlit's server.address, so the loopback
rule could not be checked.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from types import FrameType
from typing import NoReturn

import uvicorn
from starlette.middleware import Middleware
from streamlit import config
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.secrets import secrets_singleton

from core.errors import UserError
from core.exposure import HostRule, Launch, host_rule, launch_refusal
from ui.hosts import host_check

# config._server_mode as `streamlit run` sets it (streamlit.web.bootstrap.run_asgi_app) before
# the import; a Streamlit that stops setting it refuses to start rather than serving unchecked.
STREAMLIT_RUN = "starlette-app"
USE_THE_LAUNCHER = "start it with `python -m ui.launch` (`make run`) or `streamlit run app.py`"


def prepare_server() -> list[Middleware]:
    """The middleware of the app Streamlit serves (the Host check), once the start is checked
    (one line and exit when the server must not start), the legacy pages/ mode is off and the
    stop signals end the process as Python ends."""
    if config._server_mode != STREAMLIT_RUN:
        _refuse(f"app.py is served by Streamlit's own server only: {USE_THE_LAUNCHER}")
    rule = checked_rule(streamlit_launch(), os.environ)
    if isinstance(rule, str):
        _refuse(rule)
    PagesManager.uses_pages_directory = False
    stop_on_signals()
    return [host_check(rule)]


def streamlit_launch() -> Launch:
    """The address and [auth] section of this server, as Streamlit loaded them."""
    address = config.get_option("server.address")
    auth = secrets_singleton.get("auth") if secrets_singleton.load_if_toml_exists() else None
    signed = isinstance(auth, Mapping) and bool(auth)
    return Launch(str(address) if address else None, dict(auth) if signed else None)


def checked_rule(launch: Launch, environ: Mapping[str, str]) -> HostRule | str:
    """The host names `launch` answers to, or why it must not start (one line)."""
    try:
        return launch_refusal(launch, environ) or host_rule(launch, environ)
    except UserError as exc:
        return str(exc)


def stop_on_signals() -> None:
    """Make SIGTERM and SIGINT stop the uvicorn server that is importing app.py as its own
    handler does (a second SIGINT forces it), without raising the signal again once it has
    stopped. Nothing changes when no uvicorn server handles the signal here."""
    if threading.current_thread() is not threading.main_thread():
        return  # uvicorn handles signals from the main thread only
    for signum in (signal.SIGTERM, signal.SIGINT):
        server = getattr(signal.getsignal(signum), "__self__", None)
        if isinstance(server, uvicorn.Server):
            signal.signal(signum, _stopper(server))


def _stopper(server: uvicorn.Server) -> Callable[[int, FrameType | None], None]:
    def stop(signum: int, frame: FrameType | None) -> None:
        if server.should_exit and signum == signal.SIGINT:
            server.force_exit = True
        server.should_exit = True

    return stop


def _refuse(reason: str) -> NoReturn:
    print(f"error: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(2)
