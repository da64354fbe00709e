"""What routes a saved model's complaints: its serving graph on ONNX Runtime (core.models.graph)
with the `tokenizers` library, or, where there is no graph or the graph cannot serve, the torch
model itself. Nothing here imports torch or transformers.

`serving_precision` is the rule. On a CPU, "auto" takes the int8 graph where the model ships one
(re-checked, it agreed with torch fp32 on at least 99.5% of its held-out validation rows), else
the fp32 graph; "fp32" takes the fp32 graph; "bf16" means torch (ONNX Runtime has no fast bf16
on CPUs). On a GPU, torch runs. The operator's GRIEVANCE_LENS_PRECISION stands in for "auto" as
everywhere. int8 routes with a re-check: a complaint whose int8 top-two margin is under the
model's re-check margin is decided by the fp32 graph (core.models.graph).

Every load of a graph is checked: the card pins its bytes, it must have been checked against the
weights now in the folder, and it must give the probe texts the probabilities torch gave at
save (core.models.transformer.export). A graph that fails is refused with the model.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.checks import check_int
from core.errors import UserError
from core.models.card import FILES_KEY
from core.models.graph import (
    FP32,
    INT8,
    PROBE_TEXTS,
    PROBE_TOLERANCE,
    GraphSession,
    ServingEntry,
    padded,
    rechecked_rows,
    softmax,
)
from core.models.hardware import (
    SERVING_PRECISIONS,
    check_device_name,
    nvidia_gpu_visible,
    operator_precision,
)
from core.models.transformer.truncation import (
    head_tail_pieces,
    reads_head_and_tail,
    texts_as_read,
)
from core.text import cut_for_tokens

TOKENIZER_FILE = "tokenizer.json"
DEFAULT_BATCH_SIZE = 64  # texts per graph run, as the torch classifier


def serving_precision(
    entry: ServingEntry | None,
    device: str,
    precision: str,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The graph that routes ("fp32" or "int8"), or None when torch does (no graph, a GPU, or
    bf16 asked for). UserError for an unknown setting, or int8 asked of a model without it."""
    check_device_name(device)
    if precision not in SERVING_PRECISIONS:
        raise UserError(f"precision must be one of {SERVING_PRECISIONS}, got {precision!r}")
    wanted = precision if precision == INT8 else operator_precision(precision, environ)
    shipped = () if entry is None else entry.shipped
    if wanted == INT8 and INT8 not in shipped:
        raise UserError("this model has no int8 graph (it was saved before them, or int8 "
                        "disagreed with it); use --precision auto or fp32")  # fmt: skip
    if wanted == INT8:  # asked for by name: the int8 graph, which runs on the CPU
        if device == "cuda":
            raise UserError("int8 runs on the CPU (the serving graph); use --device cpu or auto")
        return INT8
    on_gpu = device == "cuda" or (device == "auto" and nvidia_gpu_visible(environ))
    if on_gpu or wanted == "bf16" or FP32 not in shipped:
        return None
    if wanted == "auto" and INT8 in shipped:
        return INT8
    return FP32


class PieceTokenizer:
    """A saved model's fast tokenizer (tokenizer.json) read by the `tokenizers` library, giving
    the word pieces the torch classifier's tokenizer gives, and the little of a Hugging Face
    tokenizer's interface `head_tail_pieces` needs."""

    is_fast = True

    def __init__(self, folder: Path, max_length: int) -> None:
        from tokenizers import Tokenizer

        self.max_length = max_length
        self._tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_length)
        self._plain = Tokenizer.from_file(str(folder / TOKENIZER_FILE))  # no truncation
        self._plain.no_padding()
        self._plain.no_truncation()
        special = _special_tokens(folder)
        self.pad_token_id = self._id_of(special.get("pad_token"), default=0)
        self.cls_token_id = self._id_of(special.get("cls_token"))
        self.sep_token_id = self._id_of(special.get("sep_token"))

    def _id_of(self, token: Any, default: int | None = None) -> int | None:
        if isinstance(token, Mapping):  # {"content": "[PAD]", ...}
            token = token.get("content")
        found = self._tokenizer.token_to_id(token) if isinstance(token, str) else None
        return default if found is None else int(found)

    def head_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's first word pieces with [CLS] and [SEP], at most `max_length`."""
        cut = [cut_for_tokens(t, self.max_length) for t in texts]
        return [list(e.ids) for e in self._tokenizer.encode_batch(cut)]

    def __call__(self, texts: Sequence[str], **_options: Any) -> dict[str, list]:
        """Pieces without special tokens, with offsets (what `head_tail_pieces` asks for)."""
        found = self._plain.encode_batch(list(texts), add_special_tokens=False)
        return {"input_ids": [e.ids for e in found], "offset_mapping": [e.offsets for e in found]}


def pieces_agree(
    folder: Path, tokenizer: Any, texts: Sequence[str], max_length: int, truncation: str
) -> bool:
    """Whether `PieceTokenizer` reads `texts` (cut and masked, as routing reads them) into the
    word pieces `tokenizer` (the torch model's) gives: a saved tokenizer.json can leave out
    something its Hugging Face wrapper does, and then the graph must not route."""
    if not (folder / TOKENIZER_FILE).is_file():
        return False
    texts = texts_as_read(texts, max_length, truncation)
    ours = PieceTokenizer(folder, max_length)
    if reads_head_and_tail(tokenizer, truncation):
        pieces = [head_tail_pieces(t, texts, max_length) for t in (ours, tokenizer)]
        return [p.ids for p in pieces[0]] == [p.ids for p in pieces[1]]
    cut = [cut_for_tokens(t, max_length) for t in texts]
    theirs = tokenizer(cut, truncation=True, max_length=max_length)["input_ids"]
    return ours.head_ids(texts) == [list(ids) for ids in theirs]


def _special_tokens(folder: Path) -> dict[str, Any]:
    """The special tokens the saved tokenizer names (tokenizer_config.json, else
    special_tokens_map.json)."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        path = folder / name
        if path.is_file():
            try:
                found = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(found, dict) and found.get("cls_token") is not None:
                return found
    return {}


class ServingClassifier:
    """A saved model's serving graph as a classifier: the decision path of `classify`, the
    intake API and the Classify page. Meets `NeuralClassifier`'s prediction interface
    (`classes_`, `predict_proba`, `predict_proba_and_features`), reading texts as it
    does: cut, masked, sorted by length, padded per batch.

    `recheck` (int8): the fp32 graph and the model's re-check margin; a row whose int8 top-two
    margin is under it gets the fp32 graph's probabilities and embedding instead."""

    def __init__(
        self,
        session: GraphSession,
        tokenizer: PieceTokenizer,
        classes: Sequence[str],
        *,
        max_length: int,
        truncation: str,
        precision: str,
        recheck: tuple[GraphSession, float] | None = None,
    ) -> None:
        self._session, self.tokenizer, self._recheck = session, tokenizer, recheck
        self.classes_ = np.asarray(list(classes), dtype=str)
        self.max_length, self.truncation, self.precision = max_length, truncation, precision

    def to_json(self) -> dict[str, str]:
        return {"device": "cpu", "precision": self.precision, "runtime": "onnxruntime"}

    def predict_proba(
        self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> np.ndarray:
        """Class probabilities (n_texts, n_classes), float64, rows in input order."""
        return self.predict_proba_and_features(texts, batch_size=batch_size)[0]

    def predict_proba_and_features(
        self, texts: Sequence[str], *, batch_size: int = DEFAULT_BATCH_SIZE
    ) -> tuple[np.ndarray, np.ndarray]:
        """`predict_proba` and each text's embedding, (n_texts, hidden) float32."""
        texts = texts_as_read(texts, self.max_length, self.truncation)
        check_int("batch_size", batch_size, minimum=1)
        order = np.argsort([len(t) for t in texts], kind="stable")
        pred_probs = np.empty((len(texts), len(self.classes_)), dtype=np.float64)
        features: np.ndarray | None = None
        for start in range(0, len(texts), batch_size):
            rows = order[start : start + batch_size]
            batch_probs, batch_features = self._routed(*self._encoded([texts[i] for i in rows]))
            pred_probs[rows] = batch_probs
            if features is None:
                features = np.empty((len(texts), batch_features.shape[1]), dtype=np.float32)
            features[rows] = batch_features
        return pred_probs, np.zeros((0, 0), np.float32) if features is None else features

    def _routed(self, ids: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One batch's probabilities and embeddings, the low-margin rows re-checked in fp32."""
        logits, features = self._session.run(ids, mask)
        pred_probs = softmax(logits)
        if self._recheck is not None:
            fp32, margin = self._recheck
            again = rechecked_rows(pred_probs, margin)
            if again.any():
                width = int(mask[again].sum(axis=1).max())  # their own longest, less padding
                logits, again_features = fp32.run(ids[again, :width], mask[again, :width])
                pred_probs[again], features[again] = softmax(logits), again_features
        return pred_probs, features

    def _encoded(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        if reads_head_and_tail(self.tokenizer, self.truncation):
            ids = [list(p.ids) for p in head_tail_pieces(self.tokenizer, texts, self.max_length)]
        else:
            ids = self.tokenizer.head_ids(texts)
        return padded(ids, self.tokenizer.pad_token_id)


def load_serving(
    folder: Path,
    card: Mapping[str, Any],
    entry: ServingEntry,
    precision: str,
    truncation: str,
    threads: int | None = None,
) -> ServingClassifier:
    """The serving classifier of the saved model at `folder` (its files already checked against
    `card`) on its `precision` graph; UserError when the graph disagrees with the weights."""
    refused = f"model {folder.name!r}: its serving graph disagrees with its weights; save it again"
    weights = (card.get(FILES_KEY) or {}).get(entry.files.weights)
    if not entry.weights_sha256 or entry.weights_sha256 != weights:
        raise UserError(refused)
    if not (folder / TOKENIZER_FILE).is_file():
        raise UserError(f"model {folder.name!r} has no {TOKENIZER_FILE}; save it again")
    tokenizer = PieceTokenizer(folder, int(card["max_length"]))
    fp32 = GraphSession.read(folder / entry.files.graphs[FP32], threads=threads)

    def served_by(session: GraphSession, graph: str, recheck=None) -> ServingClassifier:
        served = ServingClassifier(
            session, tokenizer, [str(label) for label in card["labels"]],
            max_length=int(card["max_length"]), truncation=truncation, precision=graph,
            recheck=recheck,
        )  # fmt: skip
        probe = served.predict_proba(list(PROBE_TEXTS))
        expected = np.asarray(entry.probe, dtype=np.float64)
        if expected.shape != probe.shape or np.abs(probe - expected).max() > PROBE_TOLERANCE[graph]:
            raise UserError(refused)
        return served

    fp32_served = served_by(fp32, FP32)  # int8 re-checks with it: it must hold too
    if precision == FP32:
        return fp32_served
    int8 = GraphSession.read(folder / entry.files.graphs[INT8], threads=threads)
    return served_by(int8, INT8, recheck=(fp32, entry.checks[INT8].recheck_margin))
