"""Export a fine-tuned transformer's serving graphs when it is saved, and check them against
torch before they may route anything (core.models.graph says what a serving graph is).

1. The model is traced to ONNX (`serving.onnx`, fp32): input ids and attention mask in, the
   logits and the classification layer's input (the embedding) out, batch and length dynamic.
2. Both torch fp32 and the graph read the same word pieces of up to VERIFY_ROWS validation
   rows; the graph is refused (the model then routes with torch) unless every probability
   agrees within FP32_TOLERANCE.
3. The fp32 graph is quantized to int8 (`serving-int8.onnx`, 7-bit weights per channel,
   activations per batch). 7 bits, not 8: on an AVX2-only CPU ONNX Runtime multiplies u8 by s8
   with VPMADDUBSW, whose 16-bit sums saturate at full-range weights, while AVX-512 VNNI does
   not; with 7-bit weights neither saturates, so a complaint gets the same int8 arithmetic, and
   the same desk, on either CPU (bench_serving --int8-variants measured the cost, #39). int8
   routes with a re-check: a row whose int8 top-two margin is under the model's re-check margin
   is decided by the fp32 graph. The margin is chosen on the even validation rows
   (core.models.graph.choose_recheck_margin); on the odd rows the re-checked int8 must give
   torch's label on at least INT8_AGREEMENT of them, or the int8 graph is removed (its check
   stays in the card).
4. torch's probabilities of the probe texts go into the card, which every load compares.
"""

from __future__ import annotations

import copy
import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch import nn

from core.models.card import file_digest
from core.models.graph import (
    FP32,
    FP32_TOLERANCE,
    INPUTS,
    INT8,
    INT8_AGREEMENT,
    MAIN_FILES,
    OUTPUTS,
    PROBE_TEXTS,
    GraphCheck,
    GraphSession,
    MemberFiles,
    ServingEntry,
    choose_recheck_margin,
    compare_probabilities,
    rechecked_rows,
    softmax,
)
from core.models.transformer.inference import NeuralClassifier, encode_batch
from core.models.transformer.truncation import texts_as_read

VERIFY_ROWS = 1000  # validation rows each graph is checked on (the first, in split order)
VERIFY_BATCH = 64
OPSET = 17


class _Served(nn.Module):
    """The model as the graph serves it: (input_ids, attention_mask) -> (logits, features)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        seen: list[torch.Tensor] = []
        hook = self.model.classifier.register_forward_pre_hook(lambda _m, a: seen.append(a[0]))
        try:
            logits = self.model(input_ids=input_ids, attention_mask=attention_mask).logits
        finally:
            hook.remove()
        return logits, seen[0]


def export_serving(
    neural: NeuralClassifier,
    folder: Path,
    validation_texts: Sequence[str],
    files: MemberFiles = MAIN_FILES,
) -> ServingEntry:
    """Write and check the serving graphs of `neural` into `folder` (which holds its weights
    already, as `files` names them); the card's "serving" entry. A graph that fails its check
    is not left behind."""
    model = copy.deepcopy(neural.model).to("cpu").eval()  # the trace runs on the CPU, in fp32
    read = _read_like(neural, [*validation_texts[:VERIFY_ROWS]])
    probe = _read_like(neural, list(PROBE_TEXTS))
    torch_probs = _torch_probs(model, neural, read)
    fp32_path = folder / files.graphs[FP32]
    try:
        _trace(model, neural, fp32_path)
        fp32_probs = _graph_probs(GraphSession.read(fp32_path), neural, read)
        fp32 = compare_probabilities(FP32, fp32_probs, torch_probs)
    except Exception as err:  # noqa: BLE001  an architecture the tracer cannot follow
        fp32_path.unlink(missing_ok=True)
        return ServingEntry(
            refused=f"the export failed ({type(err).__name__}); torch routes", files=files
        )
    if fp32.max_prob_diff > FP32_TOLERANCE:
        fp32_path.unlink()
        refused = "the exported graph disagreed with torch; torch routes"
        return ServingEntry(checks={FP32: _unshipped(fp32)}, refused=refused, files=files)
    int8 = _int8_graph(fp32_path, folder / files.graphs[INT8], neural, read,
                       (fp32_probs, torch_probs))  # fmt: skip
    return ServingEntry(
        weights_sha256=file_digest(folder / files.weights), files=files,
        checks={FP32: fp32, INT8: int8},
        probe=tuple(tuple(round(float(p), 7) for p in row)
                    for row in _torch_probs(model, neural, probe)),
    )  # fmt: skip


def _read_like(neural: NeuralClassifier, texts: list[str]) -> list[str]:
    return texts_as_read(texts, neural.max_length, neural.truncation)


def _batches(neural: NeuralClassifier, texts: list[str]):
    for start in range(0, len(texts), VERIFY_BATCH):
        chunk = texts[start : start + VERIFY_BATCH]
        yield encode_batch(neural.tokenizer, chunk, neural.max_length, torch.device("cpu"),
                           neural.truncation)  # fmt: skip


def _torch_probs(model: nn.Module, neural: NeuralClassifier, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, len(neural.classes_)))
    with torch.inference_mode():
        logits = [model(**batch).logits.float().numpy() for batch in _batches(neural, texts)]
    return softmax(np.concatenate(logits))


def _graph_probs(session: GraphSession, neural: NeuralClassifier, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, len(neural.classes_)))
    logits = [
        session.run(batch["input_ids"].numpy(), batch["attention_mask"].numpy())[0]
        for batch in _batches(neural, texts)
    ]
    return softmax(np.concatenate(logits))


def _unshipped(check: GraphCheck) -> GraphCheck:
    return replace(check, shipped=False)


def _trace(model: nn.Module, neural: NeuralClassifier, path: Path) -> None:
    sample = encode_batch(
        neural.tokenizer, ["a complaint", "a longer complaint about a card"], neural.max_length,
        torch.device("cpu"), neural.truncation,
    )  # fmt: skip
    dynamic = {name: {0: "batch", 1: "pieces"} for name in INPUTS}
    dynamic.update({name: {0: "batch"} for name in OUTPUTS})
    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the tracer's notes on Python branches it fixed
        torch.onnx.export(
            _Served(model).eval(), (sample["input_ids"], sample["attention_mask"]), str(path),
            dynamo=False, opset_version=OPSET, input_names=list(INPUTS),
            output_names=list(OUTPUTS), dynamic_axes=dynamic, do_constant_folding=True,
        )  # fmt: skip


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _int8_graph(
    fp32_path: Path,
    int8_path: Path,
    neural: NeuralClassifier,
    texts: list[str],
    reference: tuple[np.ndarray, np.ndarray],
) -> GraphCheck:
    """Quantize the fp32 graph's matrix products to int8 (the classification layer stays fp32),
    choose its re-check margin on the even rows and keep it only where, re-checked, it agrees
    with torch on enough odd rows. `reference`: the fp32 graph's and torch's probabilities."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    classifier = [n.name for n in onnx.load(str(fp32_path)).graph.node if "classifier" in n.name]
    with _quiet_root_logger():  # the quantizer logs its advice to pre-process on the root logger
        quantize_dynamic(
            str(fp32_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True,
            reduce_range=True, op_types_to_quantize=["MatMul"], nodes_to_exclude=classifier,
        )  # fmt: skip
    fp32_probs, torch_probs = reference
    int8_probs = _graph_probs(GraphSession.read(int8_path), neural, texts)
    choose, judge = slice(0, None, 2), slice(1, None, 2)
    margin = choose_recheck_margin(int8_probs[choose], fp32_probs[choose], torch_probs[choose])
    rechecked = rechecked_rows(int8_probs[judge], margin)
    routed = np.where(rechecked[:, None], fp32_probs[judge], int8_probs[judge])
    check = replace(
        compare_probabilities(INT8, routed, torch_probs[judge]),
        recheck_margin=margin, rechecked=float(rechecked.mean()) if len(rechecked) else 0.0,
    )  # fmt: skip
    if check.label_agreement >= INT8_AGREEMENT:
        return check
    int8_path.unlink()
    return _unshipped(check)
