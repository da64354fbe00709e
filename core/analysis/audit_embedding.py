"""The embedding audit: a pretrained encoder's frozen embeddings of every text, computed once,
and per fold a logistic-regression head fitted on the other folds' embeddings, blended with the
bag of words' out-of-fold probabilities (core.analysis.audit_blend).

The encoder never sees a label, so embedding the whole data set once leaks nothing into the
out-of-fold probabilities: only the head learns from labels, and each fold's head is fitted
without the held-out rows. A 3000-row audit takes about a minute on a CPU where fine-tuning per
fold (core.analysis.audit_fine_tune) takes hours (BENCHMARKS.md, "Label audit").
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_limits

from core.analysis.audit import (
    AuditConfig,
    AuditResult,
    FitModel,
    audit_result,
    bow_candidates,
    check_auditable,
    choose_out_of_fold,
    share_progress,
    stratified_folds,
)
from core.analysis.audit_blend import blend_out_of_fold
from core.data.dataset import Dataset
from core.data.privacy import mask_texts
from core.errors import UserError
from core.models.transformer.config import MINILM, QUICK, TrainConfig
from core.progress import Progress, ProgressCallback

if TYPE_CHECKING:  # torch and transformers load only once a embedding audit runs
    from core.models.transformer.quick import LinearHead

# AuditConfig.model of this audit: the quick recipe's frozen encoder and linear head.
EMBEDDING_AUDIT = QUICK
# Logistic-regression strengths C a fold's head chooses from, on an inner validation split of
# the fold's training rows (macro-F1, as the quick recipe). A fixed C does not carry over: the
# penalty weighs against the summed loss, so the same C regularises a 60-row fold forty times
# harder than a 2400-row one, and embedding norms differ by backbone. On the planted-flip
# benchmark (3000 demo rows, MiniLM) fixed C from 0.01 to 0.3 gave precision 0.52 to 0.55 at
# recall 0.82 to 0.83 while C=10 memorised flips (0.31); the inner choice picked 0.3 or 1 and
# matched the best fixed C (BENCHMARKS.md, "Label audit").
HEAD_STRENGTHS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
# The strengths the audit's head chooses from by out-of-fold log-loss (each fold's head fitted at
# one C, no inner split): calibrated probabilities matter more to an audit than macro-F1. On the
# planted-flip benchmark (3000 demo rows, MiniLM) log-loss chose 0.3 (0.644; the inner macro-F1
# choice gave 0.662), as on the CFPB sample; C above 3 memorised flips.
AUDIT_HEAD_STRENGTHS = (0.1, 0.3, 1.0, 3.0)
INNER_FOLDS = 5  # the inner validation rows are one stratified fifth of the fold's training rows
EMBED_PHASE = "embed"  # the Progress phase: distinct texts embedded


def embedding_train_config(
    backbone: str = MINILM, *, max_length: int = 128, device: str = "auto"
) -> TrainConfig:
    """The TrainConfig of a embedding audit over `backbone` (its encoder is used, never trained);
    `max_length` is cut to the positions the backbone has."""
    from core.models.transformer.backbone import backbone_positions

    positions = backbone_positions(backbone)
    max_length = max_length if positions is None else min(max_length, positions)
    return TrainConfig(backbone=backbone, recipe=QUICK, max_length=max_length, device=device)


class EmbeddedTexts:
    """Frozen-encoder features of a fixed set of texts, looked up by text."""

    def __init__(self, texts: Sequence[str], features: np.ndarray) -> None:
        self._row = {text: i for i, text in enumerate(texts)}
        self.features_ = features  # (n_distinct_texts, hidden)

    def of(self, texts: Sequence[str]) -> np.ndarray:
        """The features of `texts`, (len(texts), hidden); each must have been embedded."""
        missing = [t for t in texts if t not in self._row]
        if missing:
            raise UserError(f"{len(missing)} texts were never embedded; embed the data set again")
        return self.features_[[self._row[t] for t in texts]]


class HeadClassifier:
    """One fold's model: a linear head over embedded texts (the ProbabilisticClassifier
    protocol)."""

    def __init__(self, head: LinearHead, classes: Sequence[str], embedded: EmbeddedTexts) -> None:
        self.head_ = head
        self.classes_ = np.asarray(list(classes), dtype=str)
        self._embedded = embedded

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Softmax of the head's logits, (len(texts), n_classes)."""
        logits = self.head_.logits(self._embedded.of(texts))
        logits = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        return probs / probs.sum(axis=1, keepdims=True)


def embed_dataset(
    dataset: Dataset,
    config: TrainConfig,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> EmbeddedTexts | None:
    """Each distinct text of `dataset`, masked (core.data.privacy), embedded once by the frozen
    encoder of `config.backbone`; None when `cancel` was set."""
    from core.models.device import Runtime
    from core.models.transformer.backbone import load_backbone
    from core.models.transformer.quick import embed_texts

    texts = list(dict.fromkeys(dataset.texts))  # distinct, in first-seen order
    runtime = Runtime.resolve(config.device)  # the quick recipe's: as its models will predict
    model, tokenizer = load_backbone(config, sorted(set(dataset.labels)))
    model.to(runtime.device)

    def on_rows(done: int) -> None:
        if on_progress is not None:
            on_progress(Progress(done, len(texts), EMBED_PHASE))

    features = embed_texts(
        model, tokenizer, mask_texts(texts), max_length=config.max_length, runtime=runtime,
        truncation=config.truncation, on_rows=on_rows, cancel=cancel,
    )  # fmt: skip
    return None if features is None else EmbeddedTexts(texts, features)


def head_fit(
    embedded: EmbeddedTexts,
    *,
    strengths: Sequence[float] = HEAD_STRENGTHS,
    class_weights: bool = True,
    seed: int = 0,
) -> FitModel:
    """A `fit(train)` for `run_audit`: a logistic-regression head on the embeddings of a fold's
    training rows, its C chosen among `strengths` on a stratified inner split of those rows
    (seeded by `seed`; `_inner_split`), then refitted on all of them. The held-out fold is
    never looked at.

    BLAS runs single-threaded during the fit, as in core.analysis.audit.bow_fit.
    """
    from core.models.transformer.quick import fit_linear_head

    def fit(train: Dataset) -> HeadClassifier:
        classes = sorted(set(train.labels))
        inner, val = _inner_split(train, seed=seed)
        options = {"n_classes": len(classes), "class_weights": class_weights}
        with threadpool_limits(limits=1, user_api="blas"):
            strength = _middle(strengths)
            if len(val) > 0 and len(strengths) > 1:
                strength = fit_linear_head(
                    *_arrays(inner, embedded, classes), *_arrays(val, embedded, classes),
                    strengths=strengths, **options,
                ).strength  # fmt: skip
            features, labels = _arrays(train, embedded, classes)
            head = fit_linear_head(  # one strength: the "validation" rows choose nothing
                features, labels, features, labels, strengths=(strength,), **options
            )
        return HeadClassifier(head, classes, embedded)

    return fit


def _inner_split(train: Dataset, *, seed: int) -> tuple[Dataset, Dataset]:
    """A stratified fifth of `train` to choose C on, and the rest to fit on. Only labels with
    two or more rows give validation rows, so the rest keeps every label; a fold too small to
    give any (a few rows per label) gets an empty validation part and the middle strength."""
    fold = stratified_folds(train.labels, folds=INNER_FOLDS, seed=seed)
    counts = Counter(train.labels)
    is_val = [fold[i] == 0 and counts[y] > 1 for i, y in enumerate(train.labels)]
    rest = [i for i, v in enumerate(is_val) if not v]
    return train.subset(rest), train.subset([i for i, v in enumerate(is_val) if v])


def _middle(strengths: Sequence[float]) -> float:
    return sorted(strengths)[len(strengths) // 2]


def _arrays(
    part: Dataset, embedded: EmbeddedTexts, classes: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Features (rows, hidden) and label ids (rows,) of `part`."""
    ids = {label: i for i, label in enumerate(classes)}
    return embedded.of(part.texts), np.asarray([ids[y] for y in part.labels])


def embedding_audit_config(config: AuditConfig) -> AuditConfig:
    """`config` naming the embedding audit (its model name, in results and cache keys)."""
    return dataclasses.replace(config, model=EMBEDDING_AUDIT)


def run_embedding_audit(
    dataset: Dataset,
    config: AuditConfig,
    train_config: TrainConfig,
    *,
    on_embed: ProgressCallback | None = None,
    on_progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> AuditResult:
    """Audit `dataset`'s labels with heads over `train_config.backbone`'s frozen embeddings,
    blended with the bag of words.

    The head's C (AUDIT_HEAD_STRENGTHS) and the bag of words' (`config.bow_strengths`) are each
    chosen by out-of-fold log-loss, then the two are mixed (`blend_out_of_fold`). Progress comes
    in texts embedded (`on_embed`), then in folds (`on_progress`: fractions, as every
    candidate's folds are a share of each). A set
    `cancel` stops the embedding at the next batch, or the folds at the next fold, and returns
    `cancelled=True` with no issues. `result.seconds` includes loading and embedding.
    """
    if not isinstance(train_config, TrainConfig):
        raise TypeError(f"train_config must be a TrainConfig, got {type(train_config).__name__}")
    config = embedding_audit_config(config)
    check_auditable(dataset, config.folds)  # before minutes of embedding
    started = time.perf_counter()
    embedded = embed_dataset(dataset, train_config, on_progress=on_embed, cancel=cancel)
    if embedded is None:
        return audit_result(dataset, config, None, started=started)
    heads = head_candidates(embedded, class_weights=train_config.class_weights, seed=config.seed)
    bows = bow_candidates(dataclasses.replace(config, model="bow"))
    head_share = len(heads) / (len(heads) + len(bows))  # of the folds' progress
    options = {"folds": config.folds, "seed": config.seed, "cancel": cancel}
    head = choose_out_of_fold(
        dataset, heads, on_progress=share_progress(on_progress, 0.0, head_share), **options
    )
    bow = None if head is None else choose_out_of_fold(
        dataset, bows, on_progress=share_progress(on_progress, head_share, 1 - head_share),
        **options,
    )  # fmt: skip
    chosen = None if head is None or bow is None else blend_out_of_fold(dataset, head, bow)
    return audit_result(dataset, config, chosen, started=started)


def head_candidates(
    embedded: EmbeddedTexts, *, class_weights: bool = True, seed: int = 0
) -> dict[str, FitModel]:
    """A head at each of AUDIT_HEAD_STRENGTHS, by name."""
    return {
        f"head C={c:g}": head_fit(embedded, strengths=(c,), class_weights=class_weights, seed=seed)
        for c in AUDIT_HEAD_STRENGTHS
    }
