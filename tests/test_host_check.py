"""DNS rebinding: the launched server answers only requests addressed to an allowed host name.

A real `python -m ui.launch` on a free loopback port (tests/browser/server.py), asked with forged
Host headers: a page on evil.example that rebinds its name to 127.0.0.1 sends `Host:
evil.example`, and with it (same origin) its `Origin` too, which Streamlit's own WebSocket check
accepts. tests/test_start_modes.py asks the same of `streamlit run app.py`, which serves the
same app (ui.entry), and of Streamlit's other endpoints.
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.browser.server import AppServer

# A real server, as the browser tests start one (no chromium needed): about 3 s to start.
pytestmark = pytest.mark.browser

EVIL = "evil.example"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a server of the module's own (no sign-in, loopback, no app run needed)."""
    server = AppServer(tmp_path_factory.mktemp("lens-hosts"))
    yield urlsplit(server.url).port
    server.stop(kill=True)


def get(port: int, path: str, host: str) -> int:
    """The status of GET `path` sent to 127.0.0.1:`port` with `host` as its Host header."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest("GET", path, skip_host=True)
        connection.putheader("Host", host)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def stream_upgrade(port: int, host: str, origin: str | None) -> str:
    """The status line of a WebSocket upgrade to /_stcore/stream with `host` (and `origin`)."""
    lines = [
        "GET /_stcore/stream HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Protocol: streamlit",
        *([f"Origin: {origin}"] if origin else []),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
        return sock.makefile("rb").readline().decode("latin-1").strip()


@pytest.mark.parametrize("path", ["/", "/_stcore/health"])
def test_pages_answer_loopback_names_and_refuse_other_hosts(port: int, path: str):
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert get(port, path, host) == 200, host
    for host in (f"{EVIL}:{port}", EVIL, f"localhost.{EVIL}:{port}", f"0.0.0.0:{port}"):
        assert get(port, path, host) == 403, host


def test_the_websocket_answers_loopback_names_and_refuses_other_hosts(port: int):
    assert stream_upgrade(port, f"127.0.0.1:{port}", None).startswith("HTTP/1.1 101")
    assert stream_upgrade(port, f"localhost:{port}", f"http://localhost:{port}").startswith(
        "HTTP/1.1 101"
    )
    refused = stream_upgrade(port, f"{EVIL}:{port}", f"http://{EVIL}:{port}")
    assert refused.startswith("HTTP/1.1 403"), refused


def test_the_launcher_refuses_a_malformed_allowed_hosts_setting(tmp_path: Path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.update(HOME=str(tmp_path), GRIEVANCE_LENS_ALLOWED_HOSTS="https://lens.bank.example")
    done = subprocess.run(
        [sys.executable, "-m", "ui.launch", "--server.port", "9",
         "--secrets.files", str(tmp_path / "none.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: GRIEVANCE_LENS_ALLOWED_HOSTS lists 'https://lens.bank.example'")
