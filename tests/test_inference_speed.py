"""The fast inference path: the inference view (fused attention, always eval mode, shared
weights), length-sorted chunks across a whole table, and the local engine's row progress."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
import torch

from core.models.classifier import predict_in_batches, predict_with_features_in_batches
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import FUSED_ATTENTION, NeuralClassifier
from tests.conftest import separable_rows

TEXTS = [
    "upi payment failed",
    "card stolen fraud charge since yesterday no reply very bad service kindly help sir",
    "loan",
    "my upi refund pending merchant please help",
    "kyc",
]


@pytest.fixture(scope="module", params=["mean", "cls"])
def classifier(request, tiny_bert_dir) -> NeuralClassifier:
    torch.manual_seed(0)
    config = TrainConfig(
        backbone=str(tiny_bert_dir), pooling=request.param, classifier_dropout=0.5, max_length=32
    )
    model, tokenizer = load_backbone(config, ["Card Fraud", "Loan Query", "UPI Dispute"])
    return NeuralClassifier(model, tokenizer, model.config.id2label.values(), precision="fp32")


def _eager_proba(classifier: NeuralClassifier, texts: list[str]) -> np.ndarray:
    batch = classifier.tokenizer(texts, padding=True, return_tensors="pt")
    with torch.inference_mode():
        logits = classifier.model(**batch).logits
    return torch.softmax(logits, dim=-1).numpy()


def test_fused_attention_gives_the_eager_probabilities(classifier):
    fused = classifier.predict_proba(TEXTS)
    np.testing.assert_allclose(fused, _eager_proba(classifier, TEXTS), atol=1e-5)
    encoders = [m for m in classifier._predictor.modules() if getattr(m, "_supports_sdpa", False)]
    assert encoders and all(m.config._attn_implementation == FUSED_ATTENTION for m in encoders)
    # The shared model keeps eager attention: Explain reads every head's weights from it.
    batch = classifier.tokenizer(TEXTS[:1], return_tensors="pt")
    assert classifier.model(**batch, output_attentions=True).attentions


def test_predictions_never_see_dropout_even_while_the_model_trains(classifier):
    expected = classifier.predict_proba(TEXTS)
    classifier.model.train()  # as the training loop leaves it between steps
    try:
        np.testing.assert_array_equal(classifier.predict_proba(TEXTS), expected)
        np.testing.assert_array_equal(classifier.predict_proba(TEXTS), expected)
    finally:
        classifier.model.eval()


def test_the_view_shares_the_weights_it_predicts_with(classifier):
    head = classifier.model.classifier
    before = classifier.predict_proba(TEXTS)
    saved = head.bias.detach().clone()
    with torch.no_grad():
        head.bias.add_(torch.tensor([5.0, 0.0, 0.0]))  # an optimiser step, in place
    try:
        after = classifier.predict_proba(TEXTS)
        assert (after[:, 0] > before[:, 0]).all()
    finally:
        with torch.no_grad():
            head.bias.copy_(saved)


class _Recorder:
    """A predict_proba model that records the texts of each call."""

    classes_ = np.array(["long", "short"])

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def predict_proba(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return np.array([[len(t) / 100, 1 - len(t) / 100] for t in texts]).reshape(-1, 2)


def test_chunks_are_cut_from_the_whole_input_sorted_by_length():
    texts = ["x" * n for n in (50, 1, 40, 2, 30, 3, 20, 4)]  # long and short alternate
    model, seen = _Recorder(), []
    probs = predict_in_batches(model, texts, chunk=3, on_rows=seen.append)
    lengths = [[len(t) for t in call] for call in model.calls]
    assert lengths == [[1, 2, 3], [4, 20, 30], [40, 50]]  # no chunk mixes short and long
    np.testing.assert_allclose(probs[:, 0], [len(t) / 100 for t in texts])  # input order
    assert seen == [3, 6, 8]
    model.classes_ = np.array(["a", "b"])
    assert predict_in_batches(model, []).shape == (0, 2)


def test_probabilities_and_embeddings_come_back_together_in_input_order(tiny_model_dir):
    from core.models.registry import load_model

    neural = load_model(tiny_model_dir, device="cpu", precision="fp32").neural
    texts = ["card blocked after a fraud alert", "kyc", "loan emi deducted twice this month"]
    probs, features = predict_with_features_in_batches(neural, texts, chunk=2)
    np.testing.assert_allclose(probs, neural.predict_proba(texts), atol=1e-6)
    assert features.shape == (3, neural.model.classifier.in_features)
    # the embeddings are what the classification layer reads: it turns them into the logits
    logits = torch.as_tensor(features) @ neural.model.classifier.weight.T.float()
    logits += neural.model.classifier.bias.float()
    np.testing.assert_allclose(torch.softmax(logits, -1).detach().numpy(), probs, atol=1e-6)
    empty_probs, empty_features = predict_with_features_in_batches(neural, [])
    assert empty_probs.shape == (0, len(neural.classes_)) and empty_features.size == 0


def test_the_batched_loop_stops_at_a_cancel_between_chunks():
    cancel, model = threading.Event(), _Recorder()
    texts = ["x" * n for n in range(1, 8)]
    result = predict_in_batches(model, texts, chunk=3, on_rows=lambda done: cancel.set(),
                                cancel=cancel)  # fmt: skip
    assert result is None and len(model.calls) == 1  # the first chunk, then the cancel


def test_the_local_engine_reports_every_row_as_it_is_scored(tiny_model_dir, tmp_path, monkeypatch):
    from core.scale import ScaleConfig, score_archive

    monkeypatch.setitem(predict_in_batches.__kwdefaults__, "chunk", 4)  # several chunks
    monkeypatch.setitem(predict_with_features_in_batches.__kwdefaults__, "chunk", 4)
    texts, _ = separable_rows(5)
    source = tmp_path / "in.csv"
    pd.DataFrame({"id": range(len(texts)), "text": texts}).to_csv(source, index=False)
    reports: list[int] = []
    result = score_archive(
        ScaleConfig(tiny_model_dir, source, tmp_path / "out.csv"), on_rows=reports.append
    )
    written = pd.read_csv(tmp_path / "out.csv")
    assert result.rows == len(texts) == sum(reports) and len(reports) > 1
    assert written["id"].tolist() == list(range(len(texts)))
    assert written["text"].tolist() == texts
