"""The rules hold however the server starts: `streamlit run app.py` (what Streamlit's own
documentation, a container image or a platform runs), `python -m streamlit run app.py` and the
launcher (`python -m ui.launch`, `make run`) serve the same app (ui.entry).

Each mode is a real server on a free loopback port, asked with plain HTTP and a raw WebSocket
upgrade: a forged Host (a page on evil.example that rebinds its name to 127.0.0.1) is refused
(403) on the page and on every endpoint of Streamlit's own before anything is served, and the
page list a visitor gets is app.py's st.navigation, never the legacy listing of pages/.
"""

from __future__ import annotations

import ast
import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.streamlit_client import StreamlitSession
from tests.browser.server import free_port
from tests.test_host_check import EVIL, get, stream_upgrade

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60
FIRST_RUN_TIMEOUT_S = 180  # app.py's first run imports pandas and the store on a busy machine

STREAMLIT = [sys.executable, "-m", "streamlit", "run", "app.py"]
MODES = {
    "streamlit run app.py": [str(Path(sys.executable).with_name("streamlit")), "run", "app.py"],
    "python -m streamlit run app.py": STREAMLIT,
    "python -m ui.launch": [sys.executable, "-m", "ui.launch"],
}
# Streamlit's endpoints besides the page: health, host config, uploads, media, the frontend's
# static files (the page's own JavaScript), the script health check, components.
ENDPOINTS = [
    "/",
    "/_stcore/health",
    "/_stcore/host-config",
    "/_stcore/upload_file/session/file",
    "/media/0123456789abcdef.png",
    "/static/js/index.js",
    "/_stcore/script-health-check",
    "/component/x/index.html",
    "/train",
]


def server_env(home: Path) -> dict[str, str]:
    """The environment of a server of the test's own: no STREAMLIT_ settings of the caller, no
    ~/.streamlit (HOME is `home`), its own data folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", "GRIEVANCE_"))}
    home.mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home),
        GRIEVANCE_LENS_DATA_DIR=str(home / "data"),
        GRIEVANCE_LENS_MODELS_DIR=str(home / "models"),
        PYTHONUNBUFFERED="1",
        OMP_NUM_THREADS="1",
    )
    return env


def no_secrets(home: Path) -> list[str]:
    """Secrets from a file that does not exist: a developer's own never turn sign-in on."""
    return ["--secrets.files", str(home / "no-secrets.toml")]


def wait_healthy(port: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited early with code {process.returncode}")
        try:
            if get(port, "/_stcore/health", f"127.0.0.1:{port}") == 200:
                return
        except OSError:
            time.sleep(0.2)  # polling a server that is still starting, not pacing a test
    raise RuntimeError(f"the server did not answer on port {port} within {START_TIMEOUT_S} s")


@contextmanager
def started(command: list[str], home: Path) -> Iterator[tuple[int, subprocess.Popen]]:
    """A server started with `command` on a free port, answering: its port and process (killed
    afterwards unless it has ended)."""
    port = free_port()
    with (home / "server.log").open("w") as log:
        process = subprocess.Popen(
            [*command, "--server.port", str(port), *no_secrets(home)],
            cwd=ROOT, env=server_env(home), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            wait_healthy(port, process)
            yield port, process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=20)


@pytest.fixture(scope="module", params=list(MODES))
def port(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A server started in the mode the parameter names (no sign-in, loopback): its port."""
    command = MODES[request.param]
    if not Path(command[0]).exists():  # an interpreter outside a virtual environment
        pytest.skip(f"no {command[0]} beside the interpreter")
    with started(command, tmp_path_factory.mktemp("lens-start")) as (port, _):
        yield port


@pytest.mark.parametrize("path", ENDPOINTS)
def test_a_forged_host_is_refused_on_every_endpoint(port: int, path: str):
    for host in (f"{EVIL}:{port}", EVIL, f"localhost.{EVIL}:{port}", f"0.0.0.0:{port}"):
        assert get(port, path, host) == 403, host


@pytest.mark.parametrize("path", ["/", "/_stcore/health", "/_stcore/host-config"])
def test_loopback_names_are_served(port: int, path: str):
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert get(port, path, host) == 200, host


def test_the_websocket_opens_for_loopback_names_only(port: int):
    assert stream_upgrade(port, f"127.0.0.1:{port}", None).startswith("HTTP/1.1 101")
    assert stream_upgrade(port, f"localhost:{port}", f"http://localhost:{port}").startswith(
        "HTTP/1.1 101"
    )
    for host in (f"{EVIL}:{port}", EVIL):
        refused = stream_upgrade(port, host, f"http://{host}")
        assert refused.startswith("HTTP/1.1 403"), refused


def app_page_titles() -> set[str]:
    """The titles ui.frame gives st.Page: the page list app.py's st.navigation draws."""
    tree = ast.parse((ROOT / "ui" / "frame.py").read_text(encoding="utf-8"))
    return {
        keyword.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "st.Page"
        for keyword in node.keywords
        if keyword.arg == "title"
    }


def test_the_page_list_is_the_apps_own(port: int):
    """A visitor's first run lists app.py's pages by their titles: no listing of the files in
    pages/ (Streamlit's legacy multipage mode), and the app's frame around the default page."""

    async def first_run() -> StreamlitSession:
        session = StreamlitSession(f"http://127.0.0.1:{port}")
        try:
            result = await session.connect(timeout=FIRST_RUN_TIMEOUT_S)
        finally:
            await session.close()
        assert result.status == "finished" and result.exception() is None
        assert result.has_text("Grievance Lens")  # the sidebar's frame
        return session

    session = asyncio.run(first_run())
    expected = app_page_titles()
    assert len(expected) >= 10
    # "" is the main script's placeholder, sent before app.py's st.navigation names its pages.
    assert {name for name in session.pages if name} == expected
    assert {page.url_pathname for page in session.pages.values()} >= {"", "train", "classify"}


def refused_start(command: list[str], home: Path, **env: str) -> str:
    """The one line a start that must not happen prints (status 2), before serving anything."""
    done = subprocess.run(
        command, cwd=ROOT, env={**server_env(home), **env}, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return line


def test_streamlit_run_refuses_a_public_address_without_sign_in(tmp_path: Path):
    # browser.serverAddress: Streamlit would otherwise look up this machine's external address.
    command = [*STREAMLIT, "--server.address", "0.0.0.0", "--server.port", str(free_port()),
               "--browser.serverAddress", "localhost", *no_secrets(tmp_path)]  # fmt: skip
    line = refused_start(command, tmp_path)
    assert line.startswith("error: the server would listen on 0.0.0.0 without sign-in")


def test_streamlit_run_refuses_a_malformed_allowed_hosts_setting(tmp_path: Path):
    command = [*STREAMLIT, "--server.port", str(free_port()), *no_secrets(tmp_path)]
    line = refused_start(command, tmp_path, GRIEVANCE_LENS_ALLOWED_HOSTS="*.bank.example")
    assert line.startswith("error: GRIEVANCE_LENS_ALLOWED_HOSTS lists '*.bank.example'")


def test_another_asgi_server_is_refused(tmp_path: Path):
    """`uvicorn app:app` listens where uvicorn is told, not on Streamlit's server.address: the
    loopback rule could not hold, so app.py's app does not start there."""
    command = [sys.executable, "-m", "uvicorn", "app:app", "--port", str(free_port())]
    line = refused_start(command, tmp_path)
    assert "python -m ui.launch" in line and "streamlit run app.py" in line


def test_a_stop_signal_ends_the_process_as_python_ends(tmp_path: Path):
    """SIGTERM (a service manager's stop) stops `streamlit run app.py` and ends the process with
    status 0, not killed by the signal raised again: its exit hooks run (the launcher's intake
    API child, the job queue's scratch folders of complaint tables)."""
    with started(STREAMLIT, tmp_path) as (_, process):
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
