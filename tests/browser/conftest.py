"""A real `streamlit run` on a free loopback port, driven by Debian's chromium via Playwright."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
# Chromium must not reach for Google's services: this machine has no network beyond loopback.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)  # polling a server that is still starting, not pacing a test
    raise RuntimeError(f"streamlit did not answer on {url} within {timeout_s} s")


@contextmanager
def serve_app(data_dir: Path, *, models_dir: Path | None = None) -> Iterator[str]:
    """Run a server of its own on `data_dir` (its SQLite store) until the block ends; yields its
    base URL. Two blocks in a row on one folder are an app restart."""
    data_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GRIEVANCE_LENS_DATA_DIR": str(data_dir), "PYTHONUNBUFFERED": "1"}
    # One OpenMP thread, as in the test process (tests/conftest.py, one_thread): the server's
    # tiny fits and 3000-row audits gain nothing from threads on the shared 2-core machine.
    env["OMP_NUM_THREADS"] = "1"
    if models_dir is not None:
        env["GRIEVANCE_LENS_MODELS_DIR"] = str(models_dir)
    port = _free_port()
    with (data_dir / f"streamlit-{port}.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ui.launch", "--server.port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=20)


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test server's GRIEVANCE_LENS_MODELS_DIR: the saved models its Train page lists."""
    return tmp_path_factory.mktemp("lens-models")


@pytest.fixture(scope="session")
def saved_tiny_model(models_dir: Path, tiny_model_dir: Path) -> Path:
    """The session's tiny transformer (tests/conftest.py), copied to `models_dir/tiny-test` before
    the server starts; pick it on the Train page ("Use this model")."""
    return Path(shutil.copytree(tiny_model_dir, models_dir / "tiny-test"))


class AppServer:
    """The session's server (`serve_app`); `restart()` stops its process and starts a new one on
    the same folders, so `url` changes."""

    def __init__(self, data_dir: Path, *, models_dir: Path) -> None:
        self.data_dir, self.models_dir = data_dir, models_dir
        self._running = ExitStack()
        self.url = self._start()

    def _start(self) -> str:
        return self._running.enter_context(serve_app(self.data_dir, models_dir=self.models_dir))

    def restart(self) -> None:
        self._running.close()
        self.url = self._start()

    def stop(self) -> None:
        self._running.close()


@pytest.fixture(scope="session")
def app_server(
    tmp_path_factory: pytest.TempPathFactory, models_dir: Path, saved_tiny_model: Path
) -> Iterator[AppServer]:
    """Start the app once per test session (a test may restart it); stop it at the end."""
    server = AppServer(tmp_path_factory.mktemp("lens-data"), models_dir=models_dir)
    yield server
    server.stop()


@pytest.fixture()
def app_url(app_server: AppServer) -> str:
    """The base URL of the session's server, as it is now."""
    return app_server.url


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.exists():
        if os.environ.get("CI"):
            pytest.fail("CI must install Debian's chromium (see .ci/run)")
        pytest.skip("Debian's chromium is not installed: apt-get install chromium")
    from playwright.sync_api import expect, sync_playwright

    # Pages train and validate for real on a 2-core machine: give assertions time to turn true.
    expect.set_options(timeout=30_000)

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture()
def page(browser, app_url: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(app_url)
    yield page
    context.close()
