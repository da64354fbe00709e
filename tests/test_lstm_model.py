"""The bidirectional LSTM classifier (core.models.lstm): shapes, packing, order, seeding, fp32,
saving and loading, limits, and its place among the backbones and in the registry."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.access import OPERATOR
from core.data.dataset import Dataset, split_dataset
from core.errors import UserError
from core.models.lstm.model import (
    LstmConfig,
    LstmForSequenceClassification,
    create_lstm_classifier,
    is_lstm_model_dir,
)
from core.models.registry import ARCH_LSTM, load_model, save_model
from core.models.tiny.tokenizer import TinyTokenizer
from core.models.transformer.backbone import find_backbone, load_backbone, resolve_backbone
from core.models.transformer.config import BACKBONE_DEFAULTS, LSTM, TrainConfig, backbone_label
from core.models.transformer.training import train_models
from tests.helpers import TINY_LABELS, TINY_TEXTS

TEXTS = ["refund not received for the upi payment", "received refund not for the upi payment",
         "card blocked", "kyc update"]  # fmt: skip


def _model(pooling: str = "mean", seed: int = 0):
    model, tokenizer = create_lstm_classifier(TEXTS, ["a", "b"], pooling=pooling, seed=seed)
    return model.eval(), tokenizer


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_forward_shapes_and_loss(pooling):
    model, tokenizer = _model(pooling)
    batch = tokenizer(TEXTS)
    out = model(**batch, labels=torch.tensor([0, 1, 0, 1]))
    assert out.logits.shape == (4, 2) and out.pooled.shape == (4, 128)
    assert out.token_outputs.shape == (4, batch["input_ids"].shape[1], 128)
    assert out.attentions is None and out.loss.ndim == 0
    expected = torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 1, 0, 1]))
    assert torch.allclose(out.loss, expected)


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_padding_never_changes_a_complaints_logits(pooling):
    model, tokenizer = _model(pooling)
    alone = model(**tokenizer(["card blocked"])).logits
    beside_longer = model(**tokenizer(["card blocked", TEXTS[0]])).logits[:1]
    assert beside_longer.shape == alone.shape
    torch.testing.assert_close(beside_longer, alone, rtol=0, atol=1e-6)
    # The padded positions of the shorter text stay zero in the outputs: nothing ran there.
    outputs = model(**tokenizer(["card blocked", TEXTS[0]])).token_outputs
    assert torch.count_nonzero(outputs[0, 2:]) == 0


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_the_lstm_reads_word_order_at_random_init(pooling):
    model, tokenizer = _model(pooling)
    assert sorted(TEXTS[0].split()) == sorted(TEXTS[1].split())  # one bag of words
    pooled = model(**tokenizer(TEXTS[:2])).pooled
    assert (pooled[0] - pooled[1]).abs().max() > 1e-3


def test_last_pooling_is_the_final_state_of_each_direction():
    model, tokenizer = _model("last")
    batch = tokenizer(["card blocked", TEXTS[0]])
    embedded = model.embeddings(batch["input_ids"][:1, :2])  # "card blocked" without padding
    _, (h_n, _) = model.lstm(embedded)  # h_n (directions, 1, hidden)
    expected = torch.cat([h_n[0, 0], h_n[1, 0]])
    torch.testing.assert_close(model(**batch).pooled[0], expected, rtol=0, atol=1e-6)


def test_empty_text_gives_finite_probabilities():
    model, tokenizer = _model()
    probs = model(**tokenizer(["", "card blocked"])).logits.softmax(-1)
    assert torch.isfinite(probs).all()


def test_inputs_embeds_give_the_same_logits_and_a_gradient():
    model, tokenizer = _model()
    batch = tokenizer(TEXTS[:2])
    embeds = model.embeddings(batch["input_ids"]).detach().requires_grad_()
    out = model(inputs_embeds=embeds, attention_mask=batch["attention_mask"])
    torch.testing.assert_close(out.logits, model(**batch).logits, rtol=0, atol=0)
    out.logits[:, 0].sum().backward()
    assert embeds.grad is not None and embeds.grad.abs().sum() > 0
    with pytest.raises(UserError, match="exactly one of input_ids and inputs_embeds"):
        model(input_ids=batch["input_ids"], inputs_embeds=embeds)


def test_the_forward_pass_stays_fp32_under_bf16_autocast():
    model, tokenizer = _model()
    batch = tokenizer(TEXTS)
    plain = model(**batch).logits
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast = model(**batch).logits
    assert cast.dtype == torch.float32
    torch.testing.assert_close(cast, plain, rtol=0, atol=0)


def test_weights_come_from_the_seed_and_never_from_the_global_generator():
    with torch.random.fork_rng():  # whatever the global generator holds, the weights agree
        torch.manual_seed(1)
        first, _ = _model(seed=3)
        torch.manual_seed(2)
        second, _ = _model(seed=3)
    other, _ = _model(seed=4)
    for (name, a), b in zip(first.state_dict().items(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    assert not torch.equal(first.lstm.weight_ih_l0, other.lstm.weight_ih_l0)
    bound = 1 / np.sqrt(first.config.hidden_size)
    assert first.lstm.weight_hh_l0.abs().max() <= bound  # torch's own LSTM initialisation
    assert torch.count_nonzero(first.embeddings.weight[0]) == 0  # [PAD] is a zero vector


def test_labels_are_sorted_and_the_tokenizer_is_the_tiny_one():
    model, tokenizer = create_lstm_classifier(TINY_TEXTS, TINY_LABELS, seed=0)
    assert model.config.id2label == dict(enumerate(sorted(set(TINY_LABELS))))
    assert isinstance(tokenizer, TinyTokenizer) and not tokenizer.add_cls
    assert model.config.vocab_size == len(tokenizer) and model.config.d_model == 64


def test_save_and_load_round_trip_gives_identical_probabilities(tmp_path):
    model, tokenizer = _model("last")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert is_lstm_model_dir(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    assert config["model_type"] == "bilstm-classifier" and config["pooling"] == "last"
    loaded = LstmForSequenceClassification.from_pretrained(tmp_path)
    batch = TinyTokenizer.from_pretrained(tmp_path)(TEXTS)
    assert not loaded.training
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits, rtol=0, atol=0)


def _saved_with_config(tmp_path, **changes):
    model, tokenizer = _model()
    model.save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**config, **changes}), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "changes",
    [{"vocab_size": 900_000, "d_model": 2048}, {"hidden_size": 2048}, {"n_layers": 16},
     {"bidirectional": False}],
)  # fmt: skip
def test_a_config_that_does_not_fit_its_weights_is_refused_before_building(tmp_path, changes):
    folder = _saved_with_config(tmp_path, **changes)
    built = []
    original = LstmForSequenceClassification.__init__

    def spy(self, config):
        built.append(torch.get_default_device())
        original(self, config)

    LstmForSequenceClassification.__init__ = spy
    try:
        with pytest.raises(UserError, match="does not fit config.json"):
            LstmForSequenceClassification.from_pretrained(folder)
    finally:
        LstmForSequenceClassification.__init__ = original
    assert built == [torch.device("meta")]  # only the shape check's model, on no memory


@pytest.mark.parametrize(
    ("field", "value"),
    [("vocab_size", 10**9), ("hidden_size", 10**6), ("n_layers", 10**4), ("d_model", True),
     ("max_length", "64")],
)  # fmt: skip
def test_absurd_sizes_are_refused_in_one_line(tmp_path, field, value):
    folder = _saved_with_config(tmp_path, **{field: value})
    with pytest.raises(UserError, match=f"{field} must be an integer in 1..") as err:
        LstmForSequenceClassification.from_pretrained(folder)
    assert "\n" not in str(err.value)


def test_bad_pooling_dropout_and_model_type_are_refused():
    with pytest.raises(UserError, match="pooling must be 'mean' or 'last'"):
        LstmConfig(vocab_size=10, pooling="cls")
    with pytest.raises(UserError, match="dropout"):
        LstmConfig(vocab_size=10, dropout=1.0)
    with pytest.raises(UserError, match="not a bilstm-classifier config"):
        LstmConfig.from_dict({"model_type": "tiny-transformer", "vocab_size": 10})


# ------------------------------------------------------------------ the backbone "lstm"


def test_train_config_rules_for_the_lstm():
    config, defaults = TrainConfig(backbone=LSTM), BACKBONE_DEFAULTS[LSTM]
    assert (config.epochs, config.lr, config.patience) == (
        defaults.epochs, defaults.lr, defaults.patience,
    )  # fmt: skip
    assert TrainConfig(backbone=LSTM, pooling="last").pooling == "last"
    with pytest.raises(UserError, match="the LSTM takes pooling 'mean' or 'last'"):
        TrainConfig(backbone=LSTM, pooling="cls")
    with pytest.raises(UserError, match="pooling must be one of"):
        TrainConfig(backbone="tiny", pooling="last")
    with pytest.raises(UserError, match="quick recipe needs a pretrained encoder; the LSTM"):
        TrainConfig(backbone=LSTM, recipe="quick")
    with pytest.raises(UserError, match="the LSTM reads the head"):
        TrainConfig(backbone=LSTM, truncation="head_tail")
    with pytest.raises(UserError, match="head_init 'probe'"):
        TrainConfig(backbone=LSTM, head_init="probe")
    assert backbone_label(LSTM) == "LSTM (from scratch)"


def test_load_backbone_builds_a_seeded_lstm_from_the_training_texts():
    config = TrainConfig(backbone=LSTM, pooling="last", max_length=32, seed=5)
    model, tokenizer = load_backbone(config, ["a", "b"], texts=TEXTS)
    again, _ = load_backbone(config, ["a", "b"], texts=TEXTS)
    assert isinstance(model, LstmForSequenceClassification)
    assert (model.config.pooling, tokenizer.max_length) == ("last", 32)
    assert torch.equal(model.lstm.weight_hh_l0, again.lstm.weight_hh_l0)
    assert resolve_backbone(LSTM) == LSTM and find_backbone(" lstm ", models_root=".") == LSTM


@pytest.fixture(scope="module")
def saved_lstm(tmp_path_factory):
    """An LSTM trained 12 steps through the shared loop and saved as a model folder."""
    data = Dataset([f"{t} case {i}" for i in range(4) for t in TINY_TEXTS], TINY_LABELS * 4)
    train, val = split_dataset(data, val_fraction=0.25, seed=0)
    config = TrainConfig(backbone=LSTM, epochs=3, batch_size=8, max_length=32, device="cpu")
    result = train_models(train, val, config)
    root = tmp_path_factory.mktemp("lstm-models")
    folder = save_model(result, root, "lstm-a", actor=OPERATOR)
    return result, folder


def test_a_saved_lstm_loads_with_its_card_and_answers_alike(saved_lstm):
    result, folder = saved_lstm
    card = json.loads((folder / "card.json").read_text(encoding="utf-8"))
    assert (card["architecture"], card["backbone"]) == (ARCH_LSTM, "lstm")
    loaded = load_model(folder, device="cpu", precision="bf16")
    assert isinstance(loaded.neural.model, LstmForSequenceClassification)
    assert loaded.neural.precision == "fp32"  # its forward is fp32 whatever was asked
    texts = [*TINY_TEXTS, "loan kyc upi card"]
    np.testing.assert_allclose(
        loaded.neural.predict_proba(texts), result.neural.predict_proba(texts),
        rtol=0, atol=1e-6,
    )  # fmt: skip


def test_a_saved_lstm_is_refused_as_a_backbone(saved_lstm):
    _, folder = saved_lstm
    with pytest.raises(UserError, match="is an LSTM model; only transformers models"):
        find_backbone(folder.name, models_root=folder.parent)
    with pytest.raises(UserError, match="is an LSTM model; only transformers models"):
        resolve_backbone(str(folder))
