"""The browser tests' app server: a real `python -m ui.launch` on a free loopback port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 90
# app.py's first run imports torch and transformers: tens of seconds on a busy 2-core machine.
WARM_UP_TIMEOUT_S = 180


def free_port() -> int:
    """A loopback port nobody listens on now."""
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

    It reads secrets only from `secrets_file` (Streamlit's --secrets.files; by default a file
    that does not exist, so a developer's own .streamlit/secrets.toml or ~/.streamlit never
    turns sign-in on for the tests); `env` adds environment variables (e.g. the roles file).

    With `warm_up`, the server runs app.py once (Streamlit's script health check) in a
    background thread, so its imports happen before the first page is asked for, while the test
    process does other work. `url` waits until the server is ready. `restart()` ends the process
    and continues on a new one on the same folders, as an app restart after a crash does;
    `start_successor()` boots that new process ahead of time, while the test does its work.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        models_dir: Path | None = None,
        warm_up: bool = False,
        secrets_file: Path | None = None,
        env: Mapping[str, str] | None = None,
    ):
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir, self.models_dir = data_dir, models_dir
        self.secrets_file = secrets_file or data_dir / "no-secrets.toml"
        self.env = dict(env or {})
        self._start(warm_up=warm_up)

    def _start(self, *, warm_up: bool) -> None:
        self._process, self._log, self._url, self._ready = self._launch(warm_up=warm_up)
        self._successor = None

    def _launch(self, *, warm_up: bool):
        env = {**os.environ, **self.env, "GRIEVANCE_LENS_DATA_DIR": str(self.data_dir)}
        env["PYTHONUNBUFFERED"] = "1"
        # One OpenMP thread, as in the test process (tests/conftest.py, one_thread): the server's
        # tiny fits and 3000-row audits gain nothing from threads on the shared 2-core machine.
        env["OMP_NUM_THREADS"] = "1"
        if self.models_dir is not None:
            env["GRIEVANCE_LENS_MODELS_DIR"] = str(self.models_dir)
        port = free_port()
        log = (self.data_dir / f"streamlit-{port}.log").open("w")
        process = subprocess.Popen(
            [sys.executable, "-m", "ui.launch", "--server.port", str(port),
             "--server.scriptHealthCheckEnabled", "true",
             "--secrets.files", str(self.secrets_file)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        ready = _Readiness(url, process, warm_up=warm_up)
        return process, log, url, ready

    @property
    def url(self) -> str:
        """The base URL, once the server answers (and, with `warm_up`, has run app.py once)."""
        self._ready.wait()
        return self._url

    def start_successor(self) -> None:
        """Boot the process that the next `restart()` continues on (same folders, new port)."""
        if self._successor is None:
            self._successor = self._launch(warm_up=False)

    def restart(self) -> None:
        """Kill the process, as a crash would (whatever it confirmed must already be on disk),
        and continue on its successor: booted ahead by `start_successor()`, or now."""
        self.start_successor()
        successor, self._successor = self._successor, None
        self.stop(kill=True)
        self._process, self._log, self._url, self._ready = successor

    def stop(self, *, kill: bool = False) -> None:
        """Stop the process (and a successor booted for a restart that never came): gracefully
        (SIGTERM, seconds once torch is loaded) or, with `kill`, at once."""
        if self._successor is not None:
            process, log, _, _ = self._successor
            process.kill()
            process.wait(timeout=20)
            log.close()
            self._successor = None
        if kill:
            self._process.kill()
        else:
            self._process.terminate()
        self._process.wait(timeout=20)
        self._ready.join()  # ends once its request fails, if it was still waiting
        self._log.close()


class _Readiness(threading.Thread):
    """Waits in the background until a new server answers (and, with `warm_up`, has run app.py
    once); `wait()` re-raises what went wrong, in the test that needs the server."""

    def __init__(self, url: str, process: subprocess.Popen, *, warm_up: bool) -> None:
        super().__init__(daemon=True)
        self.url, self.process, self.warm_up = url, process, warm_up
        self.failure: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            _wait_healthy(self.url, self.process)
            if self.warm_up:
                check = f"{self.url}/_stcore/script-health-check"
                with urllib.request.urlopen(check, timeout=WARM_UP_TIMEOUT_S) as response:
                    response.read()
        except BaseException as exc:
            self.failure = exc

    def wait(self) -> None:
        self.join()
        if self.failure is not None:
            raise RuntimeError(f"the app server at {self.url} is not ready") from self.failure
