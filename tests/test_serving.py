"""The serving runtime (core.models.serving, core.models.graph, core.models.transformer.export):
a saved transformer routes through its ONNX graph and gives torch's answers, a graph that
disagrees with its weights is refused, and Explain reports the decision Classify gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from core.analysis.explain import ExplainConfig, explain_text
from core.errors import UserError
from core.models.card import CARD_NAME, FILES_KEY, file_digest
from core.models.classify import classify_one
from core.models.graph import (
    FP32,
    GRAPH_FILES,
    INT8,
    NEAR_TIE,
    RECHECK_MARGINS,
    SERVING_KEY,
    GraphCheck,
    ServingEntry,
    compare_probabilities,
)
from core.models.registry import load_model
from core.models.serving import PieceTokenizer, ServingClassifier, serving_precision
from core.models.transformer.truncation import head_tail_pieces

TEXTS = [
    "my card was charged twice at the shop",
    "upi payment failed, call me on 9876543210 or write to a.b@example.com",
    "",
    "loan " * 400,  # longer than max_length: cut as torch cuts it
    "ümlaut café naïve — emoji 🙂 and [CLS] typed by hand",
]


@pytest.fixture(scope="module")
def served(tiny_bert_cls_model_dir: Path):
    """The tiny [CLS] BERT loaded as classify loads it (its fp32 graph routes) and in torch."""
    return (
        load_model(tiny_bert_cls_model_dir, device="cpu", precision="fp32"),
        load_model(tiny_bert_cls_model_dir, device="cpu", precision="bf16"),
    )


def test_a_saved_transformer_carries_a_checked_graph(tiny_bert_cls_model_dir: Path):
    card = json.loads((tiny_bert_cls_model_dir / CARD_NAME).read_text())
    entry = ServingEntry.from_card(card)
    assert entry is not None and FP32 in entry.shipped
    assert entry.checks[FP32].rows == 12 and entry.checks[FP32].label_agreement == 1.0
    assert entry.checks[FP32].max_prob_diff < 1e-5
    assert entry.weights_sha256 == card[FILES_KEY]["model.safetensors"]
    for precision in entry.shipped:  # every shipped graph is pinned by the card
        assert card[FILES_KEY][GRAPH_FILES[precision]] == file_digest(
            tiny_bert_cls_model_dir / GRAPH_FILES[precision]
        )


def test_the_graph_gives_torch_fp32_probabilities_and_embeddings(served):
    graph_model, torch_model = served
    assert isinstance(graph_model.scorer, ServingClassifier)
    assert graph_model.routing == {"device": "cpu", "precision": "fp32", "runtime": "onnxruntime"}
    assert graph_model.torch_model.loaded is None  # torch loads only when asked
    neural = graph_model.neural  # the fp32 torch model of the same folder (runtime: fp32)
    assert neural.precision == "fp32"
    probs, features = graph_model.scorer.predict_proba_and_features(TEXTS)
    want_probs, want_features = neural.predict_proba_and_features(TEXTS)
    np.testing.assert_allclose(probs, want_probs, atol=1e-6)
    np.testing.assert_allclose(features, want_features, atol=1e-5)
    assert torch_model.routing["runtime"] == "torch"


def test_the_piece_tokenizer_reads_what_the_torch_tokenizer_reads(served):
    graph_model, _ = served
    tokenizer, pieces = graph_model.neural.tokenizer, graph_model.scorer.tokenizer
    for text in TEXTS:
        want = tokenizer(text, truncation=True, max_length=pieces.max_length)["input_ids"]
        assert pieces.head_ids([text]) == [want]
    ours = head_tail_pieces(pieces, TEXTS, 16)
    theirs = head_tail_pieces(tokenizer, TEXTS, 16)
    assert [p.ids for p in ours] == [p.ids for p in theirs]
    assert [p.offsets for p in ours] == [p.offsets for p in theirs]


def test_explain_reports_the_decision_classify_gives(served):
    graph_model, _ = served
    text = TEXTS[1]
    row = classify_one(graph_model, text)
    expl = explain_text(graph_model.neural, graph_model.bow, text, ExplainConfig(n_steps=2),
                        decider=graph_model.scorer)  # fmt: skip
    assert expl.neural.probabilities == row.probabilities["transformer"]  # to the last digit
    assert expl.neural.label == row.row["transformer_label"]


def _tampered_copy(source: Path, into: Path) -> Path:
    folder = into / "tampered"
    shutil.copytree(source, folder)
    return folder


def _repin(folder: Path, name: str) -> None:
    """Re-pin `name` in the card, as someone who edits a folder by hand and its card too."""
    card = json.loads((folder / CARD_NAME).read_text())
    card[FILES_KEY][name] = file_digest(folder / name)
    (folder / CARD_NAME).write_text(json.dumps(card))


def test_a_graph_exported_from_other_weights_is_refused(served, tmp_path: Path):
    from transformers import AutoModelForSequenceClassification

    from core.models.transformer.export import _trace

    graph_model, _ = served
    folder = _tampered_copy(graph_model.path, tmp_path)
    other = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        other.classifier.weight.mul_(-3.0)  # another model, same shapes
    _trace(other, graph_model.neural, folder / GRAPH_FILES[FP32])
    _repin(folder, GRAPH_FILES[FP32])
    for precision in ("fp32", "auto"):  # int8, where it ships, re-checks with the fp32 graph
        with pytest.raises(UserError, match="serving graph disagrees with its weights"):
            load_model(folder, device="cpu", precision=precision)
    assert load_model(folder, device="cpu", precision="bf16").routing["runtime"] == "torch"


def test_a_graph_checked_against_other_weights_is_refused(served, tmp_path: Path):
    graph_model, _ = served
    folder = _tampered_copy(graph_model.path, tmp_path)
    card = json.loads((folder / CARD_NAME).read_text())
    card[SERVING_KEY]["weights_sha256"] = "0" * 64
    (folder / CARD_NAME).write_text(json.dumps(card))
    with pytest.raises(UserError, match="serving graph disagrees with its weights"):
        load_model(folder, device="cpu")


def test_a_damaged_serving_entry_is_refused(served, tmp_path: Path):
    folder = _tampered_copy(served[0].path, tmp_path)
    card = json.loads((folder / CARD_NAME).read_text())
    card[SERVING_KEY]["checks"] = {"fp32": {"rows": "many"}}
    (folder / CARD_NAME).write_text(json.dumps(card))
    with pytest.raises(UserError, match="serving entry is damaged"):
        load_model(folder, device="cpu")


def test_a_graph_that_disagrees_at_save_is_not_shipped_and_torch_routes(
    tiny_bert_result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from core.access import OPERATOR
    from core.models import transformer
    from core.models.registry import save_model

    monkeypatch.setattr(transformer.export, "FP32_TOLERANCE", -1.0)  # no graph can pass
    folder = save_model(tiny_bert_result, tmp_path, "no-graph", actor=OPERATOR)
    entry = ServingEntry.from_card(json.loads((folder / CARD_NAME).read_text()))
    assert entry is not None and entry.shipped == () and "disagreed" in entry.refused
    assert not (folder / GRAPH_FILES[FP32]).exists() and not (folder / GRAPH_FILES[INT8]).exists()
    loaded = load_model(folder, device="cpu", precision="fp32")
    assert loaded.routing == {"device": "cpu", "precision": "fp32", "runtime": "torch"}


def test_int8_ships_only_where_it_agrees_enough(
    tiny_bert_result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from core.access import OPERATOR
    from core.models import transformer
    from core.models.registry import save_model

    monkeypatch.setattr(transformer.export, "INT8_AGREEMENT", 0.0)
    shipped = save_model(tiny_bert_result, tmp_path, "with-int8", actor=OPERATOR)
    check = ServingEntry.from_card(json.loads((shipped / CARD_NAME).read_text())).checks[INT8]
    assert check.shipped and check.rows == 6  # judged on the odd half of the 12 rows
    assert check.recheck_margin in RECHECK_MARGINS  # chosen on the even half
    loaded = load_model(shipped, device="cpu", precision="auto")
    assert loaded.routing["precision"] == INT8  # auto takes int8 where it ships
    assert load_model(shipped, device="cpu", precision="fp32").routing["precision"] == FP32
    assert load_model(shipped, device="cpu", precision="int8").routing["precision"] == INT8
    _classify_in_a_process(shipped, tmp_path, "int8")  # the command line takes int8 too
    monkeypatch.setattr(transformer.export, "INT8_AGREEMENT", 1.01)  # no graph can pass
    refused = save_model(tiny_bert_result, tmp_path, "without-int8", actor=OPERATOR)
    entry = ServingEntry.from_card(json.loads((refused / CARD_NAME).read_text()))
    assert entry.checks[INT8].shipped is False and entry.shipped == (FP32,)
    assert not (refused / GRAPH_FILES[INT8]).exists()
    assert load_model(refused, device="cpu").routing["precision"] == FP32
    with pytest.raises(UserError, match="no int8 graph"):
        load_model(refused, device="cpu", precision="int8")


def _classify_in_a_process(folder: Path, scratch: Path, precision: str) -> None:
    import subprocess
    import sys

    import pandas as pd

    source, out = scratch / "in.csv", scratch / "out.csv"
    pd.DataFrame({"text": TEXTS}).to_csv(source, index=False)
    run = subprocess.run(
        [sys.executable, "-m", "core", "classify", "--model", str(folder), str(source),
         "--out", str(out), "--precision", precision, "--device", "cpu"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-1000:]
    assert len(pd.read_csv(out)) == len(TEXTS)


def _entry(*precisions: str) -> ServingEntry:
    check = GraphCheck(precision=FP32, rows=1, label_agreement=1.0, max_prob_diff=0.0)
    return ServingEntry(weights_sha256="x", checks={p: check for p in precisions})


@pytest.mark.parametrize(
    ("entry", "device", "precision", "environ", "routes"),
    [
        (None, "cpu", "auto", {}, None),  # saved before graphs: torch
        (_entry(FP32), "cpu", "auto", {}, FP32),
        (_entry(FP32, INT8), "cpu", "auto", {}, INT8),
        (_entry(FP32, INT8), "cpu", "fp32", {}, FP32),
        (_entry(FP32, INT8), "cpu", "int8", {}, INT8),
        (_entry(FP32, INT8), "cpu", "int8", {"GRIEVANCE_LENS_PRECISION": "fp32"}, INT8),
        (_entry(FP32, INT8), "cpu", "bf16", {}, None),  # bf16 is torch's
        (_entry(FP32, INT8), "cpu", "auto", {"GRIEVANCE_LENS_PRECISION": "fp32"}, FP32),
        (_entry(FP32, INT8), "cuda", "auto", {}, None),  # a GPU runs torch
        (_entry(FP32, INT8), "auto", "auto", {"CUDA_VISIBLE_DEVICES": ""}, INT8),
        (_entry(FP32, INT8), "auto", "int8", {}, INT8),  # by name: even where a GPU is
    ],
)
def test_the_serving_rule(entry, device, precision, environ, routes):
    assert serving_precision(entry, device, precision, environ) == routes


def test_the_serving_rule_refuses_unknown_settings():
    with pytest.raises(UserError, match="precision must be one of"):
        serving_precision(_entry(FP32), "cpu", "fp16", {})
    with pytest.raises(UserError, match="device must be one of"):
        serving_precision(_entry(FP32), "tpu", "auto", {})
    with pytest.raises(UserError, match="no int8 graph"):
        serving_precision(_entry(FP32), "cpu", "int8", {})
    with pytest.raises(UserError, match="int8 runs on the CPU"):
        serving_precision(_entry(FP32, INT8), "cuda", "int8", {})


def test_agreement_lists_each_differing_row_with_its_margin():
    torch_probs = np.array([[0.9, 0.1], [0.52, 0.48], [0.2, 0.8]])
    graph_probs = np.array([[0.9, 0.1], [0.49, 0.51], [0.2, 0.8]])
    check = compare_probabilities(INT8, graph_probs, torch_probs)
    assert check.label_agreement == pytest.approx(2 / 3)
    assert check.differing == ((1, pytest.approx(0.04)),)
    assert all(margin < NEAR_TIE for _, margin in check.differing)
    assert check.max_prob_diff == pytest.approx(0.03)


def test_the_piece_tokenizer_knows_the_special_tokens(served):
    pieces: PieceTokenizer = served[0].scorer.tokenizer
    tokenizer = served[0].neural.tokenizer
    assert (pieces.cls_token_id, pieces.sep_token_id, pieces.pad_token_id) == (
        tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
    )  # fmt: skip


def test_people_are_told_what_routes(served):
    graph_model, torch_model = served
    assert graph_model.describe_routing() == (
        "its serving graph on ONNX Runtime (fp32: the same desk as the model on 100.0% of its "
        "validation rows)"
    )
    assert torch_model.describe_routing() == "torch (cpu, bf16)"


def _int8_of(folder: Path, margin: float) -> ServingClassifier:
    from core.models.graph import GraphSession

    fp32 = load_model(folder, device="cpu", precision="fp32").scorer
    return ServingClassifier(
        GraphSession.read(folder / GRAPH_FILES[INT8]), fp32.tokenizer, list(fp32.classes_),
        max_length=fp32.max_length, truncation=fp32.truncation, precision=INT8,
        recheck=(GraphSession.read(folder / GRAPH_FILES[FP32]), margin),
    )  # fmt: skip


def test_int8_sends_its_low_margin_rows_to_the_fp32_graph(
    tiny_bert_result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from core.access import OPERATOR
    from core.models import transformer
    from core.models.graph import top_two_margins
    from core.models.registry import save_model

    monkeypatch.setattr(transformer.export, "INT8_AGREEMENT", 0.0)
    folder = save_model(tiny_bert_result, tmp_path, "rechecked", actor=OPERATOR)
    fp32_probs, fp32_features = load_model(folder, device="cpu", precision="fp32").scorer \
        .predict_proba_and_features(TEXTS)  # fmt: skip
    every = _int8_of(folder, margin=1.01).predict_proba_and_features(TEXTS)  # all re-checked
    np.testing.assert_allclose(every[0], fp32_probs, atol=1e-6)
    np.testing.assert_allclose(every[1], fp32_features, atol=1e-5)
    plain_probs, _ = _int8_of(folder, margin=0.0).predict_proba_and_features(TEXTS)
    assert not np.allclose(plain_probs, fp32_probs, atol=1e-6)  # int8 itself differs
    margin = float(np.median(top_two_margins(plain_probs)))  # about half the rows re-checked
    some, _ = _int8_of(folder, margin=margin).predict_proba_and_features(TEXTS)
    low = top_two_margins(plain_probs) < margin
    np.testing.assert_allclose(some[low], fp32_probs[low], atol=1e-6)
    np.testing.assert_array_equal(some[~low], plain_probs[~low])


def test_the_recheck_margin_is_the_smallest_that_gives_torchs_desks():
    from core.models.graph import choose_recheck_margin

    torch_probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.7, 0.3], [0.8, 0.2]])
    fp32_probs = torch_probs + 1e-7
    # int8 flips row 1 (its int8 margin 0.04) and row 2 (margin 0.16); row 3 is right at 0.3
    int8_probs = np.array([[0.9, 0.1], [0.48, 0.52], [0.42, 0.58], [0.65, 0.35]])
    assert choose_recheck_margin(int8_probs, fp32_probs, torch_probs) == 0.2
    assert choose_recheck_margin(torch_probs, fp32_probs, torch_probs) == 0.0  # int8 exact
    wrong = np.array([[0.1, 0.9]] * 4)  # fp32 disagrees too: nothing reaches the target
    assert choose_recheck_margin(int8_probs, wrong, torch_probs) == RECHECK_MARGINS[-1]


def test_a_tokenizer_json_that_reads_otherwise_gets_no_graph(
    tiny_bert_result, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    from core.access import OPERATOR
    from core.models import registry
    from core.models.serving import pieces_agree

    folder = registry.save_model(tiny_bert_result, tmp_path, "agrees", actor=OPERATOR)
    neural = tiny_bert_result.neural
    assert pieces_agree(folder, neural.tokenizer, TEXTS, neural.max_length, neural.truncation)
    (folder / "tokenizer.json").unlink()
    assert not pieces_agree(folder, neural.tokenizer, TEXTS, neural.max_length, "head")
    monkeypatch.setattr(registry, "pieces_agree", lambda *args: False)
    refused = registry.save_model(tiny_bert_result, tmp_path, "reads-otherwise", actor=OPERATOR)
    entry = ServingEntry.from_card(json.loads((refused / CARD_NAME).read_text()))
    assert entry.shipped == () and "tokenizers library" in entry.refused
    assert not (refused / GRAPH_FILES[FP32]).exists()
    assert load_model(refused, device="cpu").routing["runtime"] == "torch"
