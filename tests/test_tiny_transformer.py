"""The from-scratch classifier: tokenizer, model, numpy twin, order-blindness without positions."""

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from core.errors import UserError
from core.lab.word_order import word_order_demo
from core.models.tiny.model import (
    TinyConfig,
    TinyTransformerForSequenceClassification,
    create_tiny_classifier,
    is_tiny_model_dir,
    predict_proba,
)
from core.models.tiny.reference import numpy_params, reference_forward
from core.models.tiny.tokenizer import CLS_ID, PAD_ID, UNK_ID, TinyTokenizer
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TINY, TrainConfig
from core.text import bag_key

CRICKET = ["India defeated Australia", "Australia defeated India"]


def _model(*, positional_encoding=True, pooling="mean", n_layers=1, seed=0, texts=CRICKET):
    model, tokenizer = create_tiny_classifier(
        texts,
        ["lost", "won", "draw"],
        positional_encoding=positional_encoding,
        pooling=pooling,
        n_layers=n_layers,
        max_length=16,
        dropout=0.0,
        seed=seed,
    )
    return model.eval(), tokenizer


# ------------------------------------------------------------------ tokenizer


def test_vocabulary_reserves_pad_unk_and_cls():
    tok = TinyTokenizer.build(["b a b", "c b a"], add_cls=True)
    assert tok.vocab == {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "b": 3, "a": 4, "c": 5}
    assert tok.encode("B, zebra a") == [CLS_ID, 3, UNK_ID, 4]
    plain = TinyTokenizer.build(["b a b", "c b a"])
    assert plain.encode("b a") == [2, 3] and plain.cls_token_id is None


def test_vocabulary_min_freq_and_max_size():
    texts = ["upi upi upi card card kyc"]
    assert list(TinyTokenizer.build(texts, min_freq=2).vocab) == ["[PAD]", "[UNK]", "upi", "card"]
    assert list(TinyTokenizer.build(texts, max_size=3).vocab) == ["[PAD]", "[UNK]", "upi"]
    with pytest.raises(ValueError, match="max_size"):
        TinyTokenizer.build(texts, max_size=2)


def test_batches_pad_dynamically_and_truncate():
    tok = TinyTokenizer.build(["a b c d e f"], max_length=4)
    batch = tok(["a b", "a b c d e f", ""])
    assert batch["input_ids"].tolist() == [[2, 3, 0, 0], [2, 3, 4, 5], [0, 0, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]]
    assert tok(["a", "b a"])["input_ids"].shape == (2, 2)  # longest in batch, not max_length
    assert tok("a", padding="max_length")["input_ids"].tolist() == [[2, 0, 0, 0]]
    assert tok("a b c d e f", max_length=3)["input_ids"].tolist() == [[2, 3, 4]]
    assert tok("a b c d e f", max_length=256)["input_ids"].shape == (1, 4)  # capped at its own
    assert tok(["a b c d e f"], truncation=False, return_tensors=None)["input_ids"] == [
        [2, 3, 4, 5, 6, 7]
    ]
    assert tok(["a", "a b"], return_tensors="np")["input_ids"].dtype == np.int64
    with pytest.raises(ValueError, match="padding=True"):
        tok(["a", "a b"], padding=False)


def test_offsets_label_positions_with_original_words():
    tok = TinyTokenizer.build(["paid by UPI"], add_cls=True)
    text = "Paid by UPI!"
    offsets = tok.word_offsets(text)
    assert offsets[0] == (0, 0)
    assert [text[s:e] for s, e in offsets[1:]] == ["Paid", "by", "UPI"]
    batch = tok([text, "paid"], return_offsets_mapping=True)
    assert batch["offset_mapping"].shape == (2, 4, 2)
    assert tok.convert_ids_to_tokens(batch["input_ids"][0].tolist()) == [
        "[CLS]",
        "paid",
        "by",
        "upi",
    ]


def test_tokenizer_round_trip(tmp_path):
    tok = TinyTokenizer.build(["refund my upi payment"], add_cls=True, max_length=7)
    tok.save_pretrained(tmp_path)
    loaded = TinyTokenizer.from_pretrained(tmp_path)
    assert loaded.vocab == tok.vocab and loaded.add_cls and loaded.model_max_length == 7
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["add_cls"] is True
    with pytest.raises(ValueError, match="vocabulary must map"):
        TinyTokenizer({"[UNK]": 0, "[PAD]": 1})


# ------------------------------------------------------------------ config and model


def test_config_validation_and_round_trip():
    config = TinyConfig(vocab_size=10, num_labels=2, id2label={0: "Card", 1: "UPI"})
    assert config.label2id == {"Card": 0, "UPI": 1}
    assert TinyConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert TinyConfig(vocab_size=5, num_labels=3).id2label[2] == "LABEL_2"
    assert hash(config) == hash(replace(config))
    with pytest.raises(ValueError, match="divisible"):
        TinyConfig(vocab_size=10, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="pooling"):
        TinyConfig(vocab_size=10, pooling="max")
    with pytest.raises(ValueError, match="id2label"):
        TinyConfig(vocab_size=10, num_labels=3, id2label={0: "a", 1: "b"})


def test_forward_shapes_loss_and_attentions():
    model, tok = _model(n_layers=2)
    batch = tok(["India defeated Australia", "India"])
    out = model(**batch, labels=torch.tensor([0, 1]), output_attentions=True)
    assert out.logits.shape == (2, 3)
    assert out.loss is not None and out.loss.ndim == 0 and torch.isfinite(out.loss)
    assert len(out.attentions) == 2 and out.attentions[0].shape == (2, 4, 3, 3)
    torch.testing.assert_close(out.attentions[1].sum(-1), torch.ones(2, 4, 3))
    assert out.attentions[0][1, :, :, 1:].abs().max() == 0  # nobody attends to padding
    assert model(**batch).attentions is None
    assert model.config.id2label == {0: "draw", 1: "lost", 2: "won"}  # sorted labels


def test_padding_does_not_change_a_prediction():
    model, tok = _model()
    alone = model(**tok(["india defeated"])).logits
    padded = model(**tok(["india defeated", "india defeated australia australia"])).logits[:1]
    torch.testing.assert_close(alone, padded)


def test_empty_text_gives_finite_probabilities():
    model, tok = _model()
    probs = predict_proba(model, tok, ["", "India"])
    assert np.isfinite(probs).all()
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-6)


def test_too_long_input_is_refused():
    model, _ = _model()
    with pytest.raises(ValueError, match="truncation"):
        model(torch.ones(1, 17, dtype=torch.long))


@pytest.mark.parametrize(
    ("positional_encoding", "pooling", "n_layers"),
    [(True, "mean", 1), (False, "mean", 2), (True, "cls", 2), (False, "cls", 1)],
)
def test_numpy_reference_matches_torch(positional_encoding, pooling, n_layers):
    texts = ["paid by card not by upi", "kyc pending since march", "upi failed"]
    model, tok = _model(
        positional_encoding=positional_encoding, pooling=pooling, n_layers=n_layers, texts=texts
    )
    batch = tok(texts)
    with torch.no_grad():
        out = model(**batch)
    logits, tokens, pooled = reference_forward(
        numpy_params(model),
        batch["input_ids"].numpy(),
        batch["attention_mask"].numpy(),
        model.config,
    )
    real = batch["attention_mask"].numpy().astype(bool)
    np.testing.assert_allclose(logits, out.logits.numpy(), atol=1e-5)
    np.testing.assert_allclose(pooled, out.pooled.numpy(), atol=1e-5)
    np.testing.assert_allclose(tokens[real], out.token_outputs.numpy()[real], atol=1e-5)


def test_save_and_load_round_trip(tmp_path):
    model, tok = _model(pooling="cls")
    model.save_pretrained(tmp_path)
    assert is_tiny_model_dir(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    loaded = TinyTransformerForSequenceClassification.from_pretrained(tmp_path)
    assert not loaded.training and loaded.config == model.config
    batch = tok(CRICKET)
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)
    assert not is_tiny_model_dir(tmp_path / "missing")
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="model.safetensors is missing"):
        TinyTransformerForSequenceClassification.from_pretrained(tmp_path)


def test_predict_proba_requires_eval_mode():
    model, tok = _model()
    probs = predict_proba(model, tok, CRICKET + ["draw"], batch_size=2)
    assert probs.shape == (3, 3)
    with pytest.raises(RuntimeError, match="eval"):
        predict_proba(model.train(), tok, CRICKET)


# ------------------------------------------------------------------ word order


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_without_positions_permuting_words_permutes_token_outputs(pooling):
    model, tok = _model(positional_encoding=False, pooling=pooling)
    with torch.no_grad():
        out = model(**tok(CRICKET))
    offset = 1 if pooling == "cls" else 0
    # "India defeated Australia" → "Australia defeated India": positions 0 and 2 swap.
    order = [offset + i for i in (2, 1, 0)]
    torch.testing.assert_close(out.token_outputs[1, offset:], out.token_outputs[0, order])
    torch.testing.assert_close(out.pooled[0], out.pooled[1])
    probs = out.logits.softmax(-1)
    torch.testing.assert_close(probs[0], probs[1])


def test_without_positions_any_shuffle_keeps_the_prediction():
    text = "money debited twice but merchant says upi payment failed"
    rng = np.random.default_rng(0)
    shuffled = [" ".join(rng.permutation(text.split())) for _ in range(4)]
    model, tok = _model(positional_encoding=False, texts=[text])
    probs = predict_proba(model, tok, [text, *shuffled])
    np.testing.assert_allclose(probs, np.repeat(probs[:1], 5, axis=0), atol=1e-6)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_with_positions_word_order_changes_the_output(pooling):
    model, tok = _model(positional_encoding=True, pooling=pooling)
    with torch.no_grad():
        out = model(**tok(CRICKET))
    assert (out.pooled[0] - out.pooled[1]).abs().max() > 1e-3
    assert (out.logits[0] - out.logits[1]).abs().max() > 1e-4


def test_word_order_demo_shows_identical_vs_different():
    demo = word_order_demo(CRICKET)
    assert demo.spread_off < 1e-5
    assert demo.spread_on > 1e-3
    np.testing.assert_allclose(demo.probs_off[0], demo.probs_off[1], atol=1e-6)
    with pytest.raises(ValueError, match="two texts"):
        word_order_demo(["alone"])


def test_word_order_demo_verdicts():
    demo = word_order_demo(CRICKET)
    assert demo.same_bag_of_words and demo.identical_off and not demo.identical_on
    assert demo.prob_spread_off < 1e-6 < demo.prob_spread_on
    other = word_order_demo(["India defeated Australia", "Australia beat India"])
    assert not other.same_bag_of_words and not other.identical_off
    same = word_order_demo(["India won", "India won"])
    assert same.identical_on and same.identical_off


# ------------------------------------------------------------------ twins


PREFIXES = [
    "",
    "sir",
    "yesterday i",
    "please check i",
    "hello team i",
    "on monday i",
    "kindly note i",
    "at the mall i",
]
SUFFIXES = [
    "",
    "please help",
    "for my order",
    "refund needed",
    "at the store",
    "today",
    "but money got debited",
]
TEMPLATES = ["{p} paid by {a} not by {b} {s}", "{p} the payment was made by {a} and not by {b} {s}"]
DESK = {"card": "Card", "upi": "UPI"}


def _twin_pairs():
    """(card text, upi text) pairs: equal bags of words, desk decided by word order."""
    pairs = []
    for template, p, s in itertools.product(TEMPLATES, PREFIXES, SUFFIXES):
        card, upi = (
            template.format(p=p, s=s, a=a, b=b).strip()
            for a, b in (("card", "upi"), ("upi", "card"))
        )
        pairs.append((card, upi))
    return pairs


def _train(model, tok, texts, labels, *, epochs=20, seed=0):
    """Minimal AdamW loop for the test; the real loop lives in core.models.transformer.loop."""
    batch = tok(texts)
    y = torch.tensor([model.config.label2id[label] for label in labels])
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    order = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(texts), generator=order).split(32):
            loss = model(batch["input_ids"][idx], batch["attention_mask"][idx], labels=y[idx]).loss
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    return model.eval()


def _twin_accuracy(positional_encoding: bool) -> tuple[float, np.ndarray]:
    pairs = _twin_pairs()
    held_out = set(np.random.default_rng(0).permutation(len(pairs))[: len(pairs) // 4].tolist())
    train = [t for i, pair in enumerate(pairs) if i not in held_out for t in pair]
    test = [t for i, pair in enumerate(pairs) if i in held_out for t in pair]
    label = [DESK["card" if "by card not" in t or "by card and" in t else "upi"] for t in train]
    model, tok = create_tiny_classifier(
        train, label, positional_encoding=positional_encoding, dropout=0.0, seed=0
    )
    _train(model, tok, train, label)
    probs = predict_proba(model, tok, test)
    truth = np.tile([model.config.label2id["Card"], model.config.label2id["UPI"]], len(test) // 2)
    return float((probs.argmax(1) == truth).mean()), probs


def test_twins_have_equal_bags_and_different_desks():
    for card, upi in _twin_pairs():
        assert bag_key(card) == bag_key(upi) and card != upi


def test_positional_encoding_separates_held_out_twins(one_thread):
    accuracy, _ = _twin_accuracy(positional_encoding=True)
    print(f"held-out twin accuracy with positional encoding: {accuracy:.3f}")
    assert accuracy >= 0.9


def test_without_positional_encoding_twins_are_capped_at_half(one_thread):
    accuracy, probs = _twin_accuracy(positional_encoding=False)
    print(f"held-out twin accuracy without positional encoding: {accuracy:.3f}")
    # Each twin pair gets the very same probabilities, so at most one of the two is right.
    np.testing.assert_allclose(probs[0::2], probs[1::2], atol=1e-5)
    assert accuracy <= 0.5


def test_same_weights_with_and_without_positions():
    model, _ = _model()
    off = TinyTransformerForSequenceClassification(replace(model.config, positional_encoding=False))
    assert set(off.state_dict()) == set(model.state_dict())  # the switch adds no weights
    assert "positional" not in model.state_dict()  # a formula, recomputed, never saved
    assert model.embeddings.padding_idx == PAD_ID
    assert model.embeddings.weight[PAD_ID].abs().max() == 0


# ------------------------------------------------------------------ crafted config.json


def _saved_with_config(tmp_path, **changes):
    model, _ = _model()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    (tmp_path / "config.json").write_text(json.dumps({**config, **changes}), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "changes",
    [
        {"vocab_size": 900_000, "d_model": 2048, "n_heads": 4},  # 7 GB of embeddings
        {"n_layers": 48},
        {"d_ff": 8192},
        {"num_labels": 3, "max_length": 4096},  # fits: positions are no weight
    ],
)
def test_a_config_that_does_not_fit_its_weights_is_refused_before_building(tmp_path, changes):
    folder = _saved_with_config(tmp_path, **changes)
    if changes.get("max_length") == 4096:
        loaded = TinyTransformerForSequenceClassification.from_pretrained(folder)
        assert loaded.config.max_length == 4096
        return
    with pytest.raises(ValueError, match="does not fit config.json"):
        TinyTransformerForSequenceClassification.from_pretrained(folder)


@pytest.mark.parametrize(
    ("field", "value"),
    [("vocab_size", 10**9), ("d_model", 10**6), ("max_length", 10**8), ("n_layers", 10**6),
     ("vocab_size", "12"), ("n_heads", True)],
)  # fmt: skip
def test_absurd_sizes_are_refused_in_one_line(tmp_path, field, value):
    folder = _saved_with_config(tmp_path, **{field: value})
    with pytest.raises(ValueError, match=f"{field} must be an integer in 1..") as err:
        TinyTransformerForSequenceClassification.from_pretrained(folder)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ embedding scale (issue #10)


def test_a_config_saved_before_embedding_scale_loads_with_scale_one(tmp_path):
    model, tok = create_tiny_classifier(CRICKET, ["lost", "won"], embedding_scale=1.0, seed=0)
    model.eval().save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    del config["embedding_scale"]  # what a folder saved before the field existed holds
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    loaded = TinyTransformerForSequenceClassification.from_pretrained(tmp_path)
    assert loaded.config.embedding_scale == 1.0
    batch = tok(CRICKET)
    torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)


def test_new_models_write_their_embedding_scale(tmp_path):
    model, _ = create_tiny_classifier(CRICKET, ["lost", "won"])
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    assert saved["embedding_scale"] == model.config.embedding_scale
    assert TinyConfig.from_dict(saved) == model.config


def test_embedding_scale_multiplies_the_word_embeddings():
    model, tok = _model(positional_encoding=False)
    ids = tok(CRICKET)["input_ids"]
    embedded = {}
    for scale in (1.0, 2.0):
        scaled = TinyTransformerForSequenceClassification(
            replace(model.config, embedding_scale=scale)
        )
        scaled.load_state_dict(model.state_dict())
        embedded[scale] = scaled.eval().embed(ids)
    torch.testing.assert_close(embedded[2.0], 2.0 * embedded[1.0])
    torch.testing.assert_close(embedded[1.0], model.embeddings(ids))


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), "0.5", True])
def test_absurd_embedding_scales_are_refused(value):
    with pytest.raises(ValueError, match="embedding_scale"):
        TinyConfig(vocab_size=10, embedding_scale=value)


def test_numpy_reference_matches_torch_with_a_scale():
    texts = ["paid by card not by upi", "kyc pending since march"]
    model, tok = create_tiny_classifier(
        texts, ["a", "b"], n_layers=2, embedding_scale=0.3, dropout=0.0, max_length=16
    )
    batch = tok(texts)
    with torch.no_grad():
        logits = model.eval()(**batch).logits
    reference, _, _ = reference_forward(
        numpy_params(model), batch["input_ids"].numpy(), batch["attention_mask"].numpy(),
        model.config,
    )  # fmt: skip
    np.testing.assert_allclose(reference, logits.numpy(), atol=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_default_architecture_without_positions_is_order_blind(pooling):
    """The defaults `core train --backbone tiny` builds, positions off: any permutation of the
    words permutes the token outputs and leaves the probabilities unchanged."""
    text = "i paid by upi not by card and was charged twice on monday"
    model, tok = create_tiny_classifier(
        [text], ["Card", "UPI"], positional_encoding=False, pooling=pooling, seed=3
    )
    model.eval()
    words = text.split()
    perms = [np.random.default_rng(i).permutation(len(words)) for i in range(5)]
    texts = [text] + [" ".join(words[j] for j in perm) for perm in perms]
    with torch.no_grad():
        out = model(**tok(texts))
    offset = 1 if pooling == "cls" else 0
    for row, perm in enumerate(perms, start=1):
        order = offset + torch.as_tensor(perm)
        torch.testing.assert_close(
            out.token_outputs[row, offset:], out.token_outputs[0, order], atol=1e-5, rtol=1e-5
        )
    probs = out.logits.softmax(-1).numpy()
    np.testing.assert_allclose(probs, np.repeat(probs[:1], len(texts), axis=0), atol=1e-6)


def test_the_tiny_backbone_is_built_with_the_architecture_defaults():
    """`core train --backbone tiny` without flags builds create_tiny_classifier's defaults."""
    config = TrainConfig(backbone=TINY)
    model, _ = load_backbone(config, ["a", "b"], texts=CRICKET)
    expected, _ = create_tiny_classifier(CRICKET, ["a", "b"], max_length=config.max_length)
    assert model.config == expected.config


@pytest.mark.parametrize("value", ["0.1", True, None, 1.0, -0.1])
def test_a_crafted_dropout_is_refused_in_one_line(value):
    """A config.json's dropout as a string or a flag is refused as the LSTM's is (not a
    TypeError deep in the range check)."""
    with pytest.raises(UserError, match="dropout must be"):
        TinyConfig(vocab_size=10, dropout=value)
