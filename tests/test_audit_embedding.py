"""Tests for core.analysis.audit_embedding: frozen embeddings computed once, a linear head per fold,
the job, and `python -m core audit --model quick`.

The encoder is the tiny random BERT of tests/conftest.py (built from a config, never
downloaded); the data are the separable toy rows: seconds, not minutes.
"""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from core.analysis import audit_embedding
from core.analysis.audit import MODEL, AuditConfig, audit_cache_key, plant_label_flips
from core.analysis.audit_embedding import (
    EMBEDDING_AUDIT,
    EmbeddedTexts,
    embedding_train_config,
    head_fit,
    run_embedding_audit,
)
from core.cli import main
from core.jobs import JobStatus
from core.models.transformer import quick
from core.progress import Progress
from core.tasks.audit import start_audit
from tests.conftest import make_dataset, separable_rows


@pytest.fixture(scope="module")
def noisy():
    """90 separable rows (30 per desk) with 9 labels flipped, and the flipped positions."""
    texts, labels = separable_rows(30)
    noisy_labels, flipped = plant_label_flips(labels, share=0.1, seed=2)
    return make_dataset(texts, list(noisy_labels)), set(flipped.tolist())


@pytest.fixture()
def config(tiny_bert_dir):
    return embedding_train_config(str(tiny_bert_dir), max_length=32, device="cpu")


@pytest.fixture()
def embedded_calls(monkeypatch) -> list[list[str]]:
    """The texts of every embed_texts call of the embedding audit."""
    calls: list[list[str]] = []
    real = quick.embed_texts

    def counting(model, tokenizer, texts, **options):
        calls.append(list(texts))
        return real(model, tokenizer, texts, **options)

    monkeypatch.setattr(quick, "embed_texts", counting)
    return calls


def test_every_distinct_text_is_embedded_exactly_once(noisy, config, embedded_calls):
    data, _ = noisy
    twice = make_dataset([*data.texts, data.texts[0]], [*data.labels, data.labels[0]])
    seen: list[Progress] = []
    result = run_embedding_audit(twice, AuditConfig(folds=3), config, on_embed=seen.append)
    assert len(embedded_calls) == 1  # once for the data set, not once per fold
    (texts,) = embedded_calls
    assert sorted(texts) == sorted(set(data.texts))  # each distinct text once
    assert seen[-1].done == seen[-1].total == len(set(data.texts)) and seen[-1].phase == "embed"
    assert (result.model, result.folds, result.cancelled) == (EMBEDDING_AUDIT, 3, False)
    assert result.pred_probs.shape == (91, 3)
    assert np.allclose(result.pred_probs.sum(axis=1), 1.0)


def test_texts_are_masked_before_the_encoder_sees_them(config, embedded_calls):
    texts, labels = separable_rows(4)
    texts[0] += " call me on 9876543210"
    run_embedding_audit(make_dataset(texts, labels), AuditConfig(folds=2), config)
    assert not any("9876543210" in t for t in embedded_calls[0])


def test_no_row_is_predicted_by_a_head_that_saw_it():
    """Features that are one-hot row ids: a head that saw a row would name its label."""
    texts = [f"row {i}" for i in range(40)]
    labels = ["A", "B"] * 20
    data = make_dataset(texts, labels)
    embedded = EmbeddedTexts(texts, np.eye(40, dtype=np.float32))
    seen_by_fold: list[set[str]] = []
    fit = head_fit(embedded, strengths=(100.0,))

    def recording_fit(train):
        seen_by_fold.append(set(train.texts))
        return fit(train)

    from core.analysis.audit import out_of_fold_probs, stratified_folds

    probs = out_of_fold_probs(data, folds=4, seed=0, fit=recording_fit)
    folds = stratified_folds(labels, folds=4, seed=0)
    for i, text in enumerate(texts):
        assert text not in seen_by_fold[folds[i]]
    assert np.allclose(probs, 0.5, atol=0.02)  # an unseen one-hot row carries no evidence


def test_planted_flips_on_separable_data_are_found(noisy, config):
    data, planted = noisy
    result = run_embedding_audit(data, AuditConfig(folds=3), config)
    flagged = {x.index for x in result.issues if MODEL in x.kinds}
    hits = len(flagged & planted)
    assert len(planted) == 9 and hits >= 6
    assert hits / len(flagged) >= 0.6  # random flagging: 0.1


def test_cancel_during_embedding_returns_a_cancelled_result(noisy, config, monkeypatch):
    data, _ = noisy
    monkeypatch.setattr(quick, "EMBED_BATCH", 8)
    cancel = threading.Event()
    folds: list = []
    result = run_embedding_audit(
        data, AuditConfig(folds=3), config, on_embed=lambda p: cancel.set(),
        on_progress=folds.append, cancel=cancel,
    )  # fmt: skip
    assert result.cancelled and result.issues == () and result.pred_probs is None
    assert folds == []


def test_cancel_between_folds_stops_at_the_next_fold(noisy, config):
    data, _ = noisy
    cancel = threading.Event()
    folds: list = []

    def on_fold(progress) -> None:
        folds.append(progress)
        cancel.set()

    result = run_embedding_audit(
        data, AuditConfig(folds=3), config, on_progress=on_fold, cancel=cancel
    )
    assert result.cancelled and len(folds) == 1


def test_bad_input_is_refused_before_the_encoder_loads(config, embedded_calls):
    tiny = make_dataset(["a b", "c d", "e f"], ["A", "A", "B"])
    with pytest.raises(ValueError, match="at least two labels"):
        run_embedding_audit(tiny, AuditConfig(folds=2), config)
    with pytest.raises(TypeError, match="TrainConfig"):
        run_embedding_audit(tiny, AuditConfig(folds=2), {"backbone": "minilm"})
    with pytest.raises(ValueError, match="pretrained encoder"):
        embedding_train_config("tiny")
    assert embedded_calls == []


def test_the_cache_key_names_the_backbone(noisy, config, tiny_bert_dir):
    data, _ = noisy
    settings = audit_embedding.embedding_audit_config(AuditConfig())
    minilm = embedding_train_config()
    assert audit_cache_key(data, settings, fit_settings=vars(config)) != audit_cache_key(
        data, settings, fit_settings=vars(minilm)
    )


def test_the_task_reports_texts_then_folds(noisy, config, job_queue, requester):
    data, _ = noisy
    settings = audit_embedding.embedding_audit_config(AuditConfig(folds=3))
    run = start_audit(data, settings, train_config=config, key="q", queue=job_queue,
                      requester=requester)  # fmt: skip
    snapshot = run.job.wait(300)
    assert snapshot.status is JobStatus.DONE and snapshot.result.model == EMBEDDING_AUDIT
    assert snapshot.latest == Progress(3, 3, "audit", "Fold 3 of 3")


# ------------------------------------------------------------------------------ the CLI


@pytest.fixture()
def toy_csv(tmp_path, noisy):
    data, _ = noisy
    path = tmp_path / "toy.csv"
    data.to_frame().rename(columns={"label": "desk"}).to_csv(path, index=False)
    return path


def test_cli_embedding_audit_prints_the_contract_keys(toy_csv, tiny_bert_dir, capsys):
    args = ["audit", str(toy_csv), "--model", "quick", "--backbone", str(tiny_bert_dir)]
    assert main([*args, "--folds", "3", "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert (document["model"], document["folds"]) == ("quick", 3)
    assert document["backbone"] == tiny_bert_dir.name  # a folder is named, never its path
    assert {"row", "text", "given_label", "suggested_label", "quality"} <= set(
        document["issues"][0]
    )
    assert "embedding" in captured.err and "folds" in captured.err


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--model", "quick", "--backbone", "tiny"], "pretrained encoder"),
        (["--backbone", "minilm"], "--backbone is for --model quick"),
        (["--model", "quick", "--folds", "1"], "folds"),
    ],
)
def test_cli_embedding_audit_bad_input_is_one_line(toy_csv, capsys, extra, fragment):
    assert main(["audit", str(toy_csv), *extra]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0]


def test_cli_embedding_audit_of_a_backbone_that_does_not_load(toy_csv, tmp_path, capsys):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    assert main(["audit", str(toy_csv), "--model", "quick", "--backbone", str(empty)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
