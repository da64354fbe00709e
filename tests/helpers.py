"""Helpers shared by the test modules: the command line run in-process or as a real process, a
page opened through the app's router, and the tiny model trained in seconds and saved (no
download)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The [auth] section AppTests sign in with (st.user is set by the test; nothing is contacted).
AUTH = {
    "redirect_uri": "http://127.0.0.1:8501/oauth2callback",
    "cookie_secret": "a-test-cookie-secret-of-more-than-32-characters",
    "client_id": "lens",
    "client_secret": "lens-secret",
    "server_metadata_url": "http://127.0.0.1:9/.well-known/openid-configuration",
}

TINY_TEXTS = [
    "upi payment failed but money debited",
    "upi refund not received after failed payment",
    "card used for a purchase i never made",
    "fraud transaction on my credit card",
    "emi charged twice on my home loan",
    "loan statement not received this month",
    "please update my kyc address",
    "kyc documents rejected again",
]
TINY_LABELS = ["UPI Dispute", "UPI Dispute", "Card Fraud", "Card Fraud", "Loan Query",
               "Loan Query", "KYC Update", "KYC Update"]  # fmt: skip


@dataclass(frozen=True)
class CliRun:
    """What one command printed and the exit code it ended with."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliRun:
    """`python -m core ARGS` in this process, through `core.cli.main` (no torch import per run).

    Works in fixtures of any scope, where capsys is not available.
    """
    from core.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse errors exit
            code = exc.code
    return CliRun(code, out.getvalue(), err.getvalue())


def run_cli_process(*args: str) -> CliRun:
    """`python -m core ARGS` as users run it: the real entry point, in a process of its own."""
    result = subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return CliRun(result.returncode, result.stdout, result.stderr)


def distinct_tiny_data():
    """32 distinct tiny complaints (TINY_TEXTS four times, numbered): a model trained on them
    has texts on one side of its split only, as an inherited split needs."""
    from core.data.dataset import Dataset

    return Dataset([f"{t} case {i}" for i in range(4) for t in TINY_TEXTS], TINY_LABELS * 4)


def save_distinct_tiny_model(folder: Path) -> Path:
    """The from-scratch tiny transformer trained 20 steps on `distinct_tiny_data()`, saved to
    `folder`."""
    from core.access import OPERATOR
    from core.data.dataset import split_dataset
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    data = distinct_tiny_data()
    train, val = split_dataset(data, val_fraction=0.25, seed=0)
    config = TrainConfig(backbone="tiny", lr=1e-3, epochs=20, max_steps=20, batch_size=8)
    return save_model(
        train_models(train, val, config), folder.parent, folder.name, actor=OPERATOR,
        data_fingerprint=data.fingerprint,
    )  # fmt: skip


def save_tiny_model(folder: Path) -> Path:
    """Train the from-scratch tiny transformer for 20 steps and save it to `folder`."""
    from core.access import OPERATOR
    from core.data.dataset import Dataset, split_dataset
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    dataset = Dataset(TINY_TEXTS * 4, TINY_LABELS * 4)
    train, val = split_dataset(dataset, val_fraction=0.25, seed=0)
    config = TrainConfig(backbone="tiny", lr=1e-3, epochs=20, max_steps=20, batch_size=8)
    result = train_models(train, val, config)
    return save_model(
        result, folder.parent, folder.name, actor=OPERATOR, data_fingerprint=dataset.fingerprint
    )


def with_blend(model_dir: Path, folder: Path, blend) -> Path:
    """A copy of the saved model `model_dir` at `folder` whose card routes with `blend`
    (core.models.blend.Blend); the card pins the other files, so the copy still loads."""
    import json
    import shutil

    shutil.copytree(model_dir, folder)
    card_path = folder / "card.json"
    card = json.loads(card_path.read_text(encoding="utf-8"))
    card["blend"] = blend.to_json()
    card_path.write_text(json.dumps(card, indent=2), encoding="utf-8")
    return folder


def open_page(page: str, state: dict | None = None):
    """The page file `page` opened through app.py's router (st.page_link needs the pages that
    st.navigation registers), with `state` in the session; returned before it runs."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    at.run()
    return at.switch_page(page)


_MARKER_CODE = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def add_remote_code(
    folder: Path, marker: Path, *, auto_map=True, script=True, where="config.json"
) -> Path:
    """Make `folder` look like a remote-code model whose module writes `marker` when run."""
    if script:
        (folder / "modeling_evil.py").write_text(_MARKER_CODE.format(marker=str(marker)))
    if auto_map:
        config = json.loads((folder / where).read_text(encoding="utf-8"))
        config["auto_map"] = {"AutoModel": "modeling_evil.EvilModel"}
        (folder / where).write_text(json.dumps(config), encoding="utf-8")
    return folder


def inbox_routing(desk: str, confidence: float, *, unsure: bool):
    """A routing answer of the intake API for a test's inbox (core.intake.inbox.Routing): `desk`
    with `confidence`, the rest on one other desk, flagged for people when `unsure`."""
    from core.intake.inbox import Routing

    other = "Other" if desk != "Other" else "Loan Query"
    probabilities = {desk: confidence, other: round(1 - confidence, 6)}
    reason = "low confidence" if unsure else ""
    return Routing(desk, confidence, unsure, reason, 0.1, "transformer", probabilities)


def inbox_submission(caller_id: str, text: str, channel: str, received: str):
    """A complaint as the bank's system posts it (core.intake.inbox.Submission), received at
    the ISO time `received`."""
    from datetime import datetime

    from core.intake.inbox import Submission

    return Submission(caller_id, text, channel, received_at=datetime.fromisoformat(received))


def inbox_items():
    """Four complaints of the intake API with hand-made routings (no model), three of them sent
    to people. UPI Dispute has a 24 h clock and Card Fraud 240 h in the bundled TAT file, so
    the card complaint, received first, is due last."""
    return [
        (inbox_submission("c-1", "card stolen, unknown charge", "branch", "2025-06-01T08:00+00:00"),
         inbox_routing("Card Fraud", 0.41, unsure=True)),
        (inbox_submission("c-2", "upi paisa gaya", "web", "2025-06-02T08:00+00:00"),
         inbox_routing("UPI Dispute", 0.38, unsure=True)),
        (inbox_submission("c-3", "emi charged twice", "call centre", "2025-06-02T09:00+00:00"),
         inbox_routing("Loan Query", 0.97, unsure=False)),
        (inbox_submission("c-4", "upi refund pending", "app", "2025-06-01T20:00+00:00"),
         inbox_routing("UPI Dispute", 0.45, unsure=True)),
    ]  # fmt: skip
