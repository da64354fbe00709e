"""The browser tests' app server: a real `python -m ui.launch` on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90
# app.py's first run imports torch and transformers: tens of seconds on a busy 2-core machine.
WARM_UP_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_healthy(url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited early with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)  # polling a server that is still starting, not pacing a test
    raise RuntimeError(f"streamlit did not answer on {url} within {START_TIMEOUT_S} s")


class AppServer:
    """A server of its own on `data_dir` (its SQLite store) and `models_dir` (the saved models
    its Train page lists), started at construction.

    With `warm_up`, the server runs app.py once (Streamlit's script health check) in a
    background thread, so its imports happen before the first page is asked for, while the test
    process does other work. `url` waits until the server is ready. `restart()` stops the process
    and starts a new, cold one on the same folders, as an app restart does.
    """

    def __init__(self, data_dir: Path, *, models_dir: Path | None = None, warm_up: bool = False):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir, self.models_dir = data_dir, models_dir
        self._start(warm_up=warm_up)

    def _start(self, *, warm_up: bool) -> None:
        env = {**os.environ, "GRIEVANCE_LENS_DATA_DIR": str(self.data_dir), "PYTHONUNBUFFERED": "1"}
        # One OpenMP thread, as in the test process (tests/conftest.py, one_thread): the server's
        # tiny fits and 3000-row audits gain nothing from threads on the shared 2-core machine.
        env["OMP_NUM_THREADS"] = "1"
        if self.models_dir is not None:
            env["GRIEVANCE_LENS_MODELS_DIR"] = str(self.models_dir)
        port = _free_port()
        self._log = (self.data_dir / f"streamlit-{port}.log").open("w")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "ui.launch", "--server.port", str(port),
             "--server.scriptHealthCheckEnabled", "true"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._url = f"http://127.0.0.1:{port}"
        self._failure: BaseException | None = None
        self._ready = threading.Thread(target=self._get_ready, args=(warm_up,), daemon=True)
        self._ready.start()

    def _get_ready(self, warm_up: bool) -> None:
        try:
            _wait_healthy(self._url, self._process)
            if warm_up:
                check = f"{self._url}/_stcore/script-health-check"
                with urllib.request.urlopen(check, timeout=WARM_UP_TIMEOUT_S) as response:
                    response.read()
        except BaseException as exc:  # re-raised by `url`, in the test that needs the server
            self._failure = exc

    @property
    def url(self) -> str:
        """The base URL, once the server answers (and, with `warm_up`, has run app.py once)."""
        self._ready.join()
        if self._failure is not None:
            raise RuntimeError(f"the app server at {self._url} is not ready") from self._failure
        return self._url

    def restart(self) -> None:
        """Stop the process; start a new one on the same folders."""
        self.stop()
        self._start(warm_up=False)

    def stop(self, *, kill: bool = False) -> None:
        """Stop the process: gracefully (SIGTERM, seconds once torch is loaded) or, with `kill`,
        at once, when nothing will read its store again."""
        if kill:
            self._process.kill()
        else:
            self._process.terminate()
        self._process.wait(timeout=20)
        self._ready.join()  # ends once its request fails, if it was still waiting
        self._log.close()
