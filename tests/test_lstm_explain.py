"""The LSTM's gradient × input (core.analysis.lstm_explain): exact on a model linear in its
embeddings, equal to finite differences on a tiny random LSTM, word scores that add up to the
token total, masking, truncation, a shared model left untouched; an active LSTM model explained
without attention on the command line; the word grid's third row."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from core.analysis.lstm_explain import (
    METHOD,
    _gradient_view,
    explain_any,
    explain_lstm,
    explain_lstm_classifier,
    gradient_x_input,
    is_lstm_classifier,
)
from core.charts.explain_html import escaped_explanation_document, escaped_highlight_html
from core.charts.word_strip import WordRow
from core.errors import UserError
from core.models.lstm.model import create_lstm_classifier
from tests.helpers import TINY_LABELS, TINY_TEXTS, run_cli

TEXT = "upi payment failed but money debited twice"


def save_tiny_lstm(folder: Path) -> Path:
    """A bidirectional LSTM trained 20 steps on the tiny complaints, saved to `folder` (backbone
    lstm, a bag of words beside it, as every saved model)."""
    from core.access import OPERATOR
    from core.data.dataset import Dataset, split_dataset
    from core.models.registry import save_model
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    dataset = Dataset(TINY_TEXTS * 4, TINY_LABELS * 4)
    train, val = split_dataset(dataset, val_fraction=0.25, seed=0)
    config = TrainConfig(backbone="lstm", lr=1e-2, epochs=20, max_steps=20, batch_size=8)
    return save_model(
        train_models(train, val, config), folder.parent, folder.name, actor=OPERATOR,
        data_fingerprint=dataset.fingerprint,
    )  # fmt: skip


@pytest.fixture(scope="module")
def lstm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_lstm(tmp_path_factory.mktemp("models") / "lstm-test")


@pytest.fixture(scope="module")
def lstm():
    """A tiny random LSTM (dropout 0.5, so a pass with dropout would show) and its tokenizer."""
    model, tokenizer = create_lstm_classifier(
        TINY_TEXTS, TINY_LABELS, d_model=8, hidden_size=6, max_length=12, dropout=0.5, seed=3
    )
    return model.eval(), tokenizer


def centred(model: nn.Module, embeds: torch.Tensor, index: int) -> float:
    """The target's centred logit of word embeddings (1, seq, d), computed directly."""
    with torch.no_grad():
        logits = model(inputs_embeds=embeds).logits[0].double()
    return float(logits[index] - logits.mean())


# --------------------------------------------------------------------------- exactness


@dataclass(frozen=True)
class _Config:
    id2label: dict
    num_labels: int
    max_length: int = 64


@dataclass(frozen=True)
class _Out:
    logits: torch.Tensor


class LinearInEmbeddings(nn.Module):
    """logits = W · (sum of the word embeddings) + b: gradient × input is then exact."""

    def __init__(self, vocab: int, d: int, labels: list[str]) -> None:
        super().__init__()
        self.config = _Config(dict(enumerate(labels)), len(labels))
        generator = torch.Generator().manual_seed(0)
        self.embeddings = nn.Embedding(vocab, d, padding_idx=0)
        with torch.no_grad():
            self.embeddings.weight.copy_(torch.randn(vocab, d, generator=generator))
            self.embeddings.weight[0].zero_()
        self.head = nn.Linear(d, len(labels))

    def forward(self, inputs_embeds: torch.Tensor, attention_mask=None) -> _Out:
        return _Out(self.head(inputs_embeds.sum(dim=1)))


def test_linear_model_scores_are_exact_and_add_up_to_the_logit_gap(lstm):
    _, tokenizer = lstm
    labels = sorted(set(TINY_LABELS))
    model = LinearInEmbeddings(len(tokenizer), 5, labels).eval()
    result = explain_lstm(model, tokenizer, "Card fraud on my card", target="Card Fraud")
    ids = tokenizer.encode("Card fraud on my card")
    weights = model.head.weight.detach().double()  # (k, d)
    direction = weights[labels.index("Card Fraud")] - weights.mean(dim=0)  # centred logit's
    expected = model.embeddings.weight.detach().double()[ids] @ direction  # (seq,)
    assert result.words == ("Card", "fraud", "on", "my", "card")
    np.testing.assert_allclose(result.scores, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert result.scores[0] == pytest.approx(result.scores[4])  # the same word, the same score
    assert result.delta == pytest.approx(0.0, abs=1e-5)  # linear: F(text) - F(PAD) exactly


def test_scores_match_finite_differences_on_a_random_lstm(lstm):
    model, tokenizer = lstm
    ids = torch.tensor([tokenizer.encode(TEXT)])
    grads = gradient_x_input(model, ids, 2)
    embeds = model.embeddings(ids).detach()
    h = 1e-2
    for i in range(ids.shape[1]):  # d/dα F(e with token i scaled by α) at α = 1
        up, down = embeds.clone(), embeds.clone()
        up[0, i] *= 1 + h
        down[0, i] *= 1 - h
        estimate = (centred(model, up, 2) - centred(model, down, 2)) / (2 * h)
        assert grads.scores[i] == pytest.approx(estimate, abs=2e-4), i
    base = centred(model, torch.zeros_like(embeds), 2)
    assert grads.logit_gap == pytest.approx(centred(model, embeds, 2) - base, abs=1e-5)


def test_word_scores_add_up_to_the_token_total_and_follow_the_target(lstm):
    model, tokenizer = lstm
    result = explain_lstm(model, tokenizer, TEXT)
    assert sum(result.scores) + result.unassigned == pytest.approx(result.total, abs=1e-12)
    assert result.words == tuple(TEXT.split()) and all(result.seen)
    with torch.no_grad():  # its answer is the eval-mode model's (dropout 0.5 switched off)
        logits = model(**tokenizer([TEXT])).logits[0]
    probs = torch.softmax(logits, -1).numpy()
    np.testing.assert_allclose(list(result.probabilities.values()), probs, atol=1e-6)
    assert result.target == result.label == model.config.id2label[int(np.argmax(probs))]
    desk = next(d for d in sorted(set(TINY_LABELS)) if d != result.label)
    other = explain_lstm(model, tokenizer, TEXT, target=desk)
    assert other.target == desk and other.label == result.label
    assert other.scores != result.scores
    assert explain_lstm(model, tokenizer, TEXT).scores == result.scores  # deterministic


def test_the_shared_model_is_left_untouched(lstm):
    model, tokenizer = lstm
    view = _gradient_view(model)  # training mode (cuDNN's LSTM backward), dropout off
    assert view.training and view.dropout.p == 0.0
    assert view.embeddings.weight is model.embeddings.weight  # weights shared, not copied
    explain_lstm(model, tokenizer, TEXT)
    assert not model.training and model.dropout.p == 0.5
    assert all(p.grad is None for p in model.parameters())


def test_personal_data_is_masked_and_long_texts_are_cut(lstm):
    model, tokenizer = lstm
    masked = explain_lstm(model, tokenizer, "card 4111 1111 1111 1111 stolen")
    assert "4111" not in masked.text and "CARD_NO" in masked.words
    assert "[UNK]" in masked.tokens  # the placeholder is no word of its vocabulary
    long = " ".join(["upi"] * 20)  # max_length 12
    cut = explain_lstm(model, tokenizer, long)
    assert cut.seen == (True,) * 12 + (False,) * 8 and cut.scores[12:] == (0.0,) * 8
    assert sum(cut.scores) == pytest.approx(cut.total, abs=1e-12)


def test_refusals(lstm):
    model, tokenizer = lstm
    with pytest.raises(UserError, match="no desk"):
        explain_lstm(model, tokenizer, TEXT, target="Other")
    with pytest.raises(UserError, match="no words"):
        explain_lstm(model, tokenizer, "  ?! ")
    with pytest.raises(ValueError, match="words"):
        explain_lstm(model, tokenizer, TEXT, words=["upi"])


# --------------------------------------------------------------------------- saved LSTM models


def test_a_saved_lstm_explains_with_its_runtime_answer(lstm_dir):
    from core.models.registry import load_model

    loaded = load_model(lstm_dir, device="cpu")
    assert is_lstm_classifier(loaded.neural)
    result = explain_lstm_classifier(loaded.neural, TEXT)
    expected = loaded.neural.predict_proba([TEXT])[0]
    np.testing.assert_allclose(list(result.probabilities.values()), expected, atol=1e-6)
    expl = explain_any(loaded.neural, loaded.bow, TEXT)
    assert expl.neural_scores == result.scores
    assert (expl.attention.n_layers, expl.attention.n_heads) == (0, 0)
    assert expl.attention.tokens == tuple(TEXT.split())


def test_an_lstm_explanation_keeps_the_offsets_of_the_tokens_it_read(lstm_dir):
    from core.models.registry import load_model

    loaded = load_model(lstm_dir, device="cpu")
    expl = explain_any(loaded.neural, loaded.bow, TEXT)
    assert len(expl.token_offsets) == len(expl.attention.tokens)
    assert [expl.text[a:b] for a, b in expl.token_offsets] == list(expl.attention.tokens)


def test_cli_explains_an_lstm_model_without_attention(lstm_dir):
    run = run_cli("explain", "--model", str(lstm_dir), TEXT, "--json", "--device", "cpu")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["method"] == METHOD
    assert document["words"] == TEXT.split()
    assert len(document["transformer_scores"]) == len(document["bow_scores"]) == 7
    assert document["attention"]["layers"] == 0 and document["attention"]["heads"] == 0
    assert document["attention"]["tokens"] == TEXT.split()
    assert set(document["transformer"]["probabilities"]) == set(TINY_LABELS)


def test_cli_probes_an_lstm_model(lstm_dir):
    run = run_cli("probe", "--model", str(lstm_dir), TEXT, "--json", "--device", "cpu")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["original"]["transformer"]["label"] in set(TINY_LABELS)
    assert document["perturbations"]


# --------------------------------------------------------------------------- the word grid


def test_the_word_grid_gets_a_third_escaped_row(lstm_dir):
    from core.models.registry import load_model

    loaded = load_model(lstm_dir, device="cpu")
    hostile = "<b>upi</b> failed & refund"
    expl = explain_any(loaded.neural, loaded.bow, hostile)
    words = tuple(w.text for w in expl.words)
    row = WordRow("LSTM <i>beside</i>", words, tuple(range(len(words))), label="<script>")
    fragment = escaped_highlight_html(expl, extra=row, top_name="LSTM (gradient x input)")
    assert "<i>" not in fragment and "LSTM &lt;i&gt;beside&lt;/i&gt;" in fragment
    assert fragment.count(">upi</span>") == 3  # three rows: LSTM, bag of words, extra
    assert "LSTM (gradient x input) " in fragment  # the top row's tooltips name it
    document = escaped_explanation_document(expl, extra=row, method=METHOD)
    assert "<script>" not in document and "&lt;script&gt;" in document
    assert "gradient x input: logit gap" in document
    with pytest.raises(ValueError, match="aligned"):
        escaped_highlight_html(expl, extra=WordRow("x", ("upi",), (1.0,)))
