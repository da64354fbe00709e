"""Head-and-tail truncation: a long complaint is read by its first 64 word pieces and its last
ones, the same way in training, classification and explanations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import NeuralClassifier, encode_batch
from core.models.transformer.truncation import (
    HEAD_PIECES,
    cut_text,
    head_pieces,
    head_tail_pieces,
)

LONG = " ".join(["upi payment failed"] * 30 + ["card stolen yesterday"] * 30)  # 180 words


@pytest.fixture(scope="module")
def tokenizer(tiny_bert_dir):
    return AutoTokenizer.from_pretrained(tiny_bert_dir)


def test_a_long_text_keeps_its_first_and_last_pieces(tokenizer):
    (read,) = head_tail_pieces(tokenizer, [LONG], 32)
    every = tokenizer(LONG, add_special_tokens=False)["input_ids"]
    head = head_pieces(32)  # 16 of the 30 pieces between [CLS] and [SEP]
    assert len(read.ids) == 32 and read.special == (True, *[False] * 30, True)
    assert read.ids[0] == tokenizer.cls_token_id and read.ids[-1] == tokenizer.sep_token_id
    assert list(read.ids[1:-1]) == every[:head] + every[len(every) - (30 - head) :]


def test_at_max_length_128_the_tail_is_read(tokenizer):
    (read,) = head_tail_pieces(tokenizer, [LONG], 128)
    words = [LONG[a:b] for a, b in read.offsets[1:-1]]  # offsets index the text given
    assert words[:3] == ["upi", "payment", "failed"] and words[-3:] == [
        "card",
        "stolen",
        "yesterday",
    ]
    assert len(read.ids) == 128 and "card" not in words[:HEAD_PIECES]


def test_a_short_text_is_read_as_the_tokenizer_reads_it(tokenizer):
    (read,) = head_tail_pieces(tokenizer, ["upi payment failed"], 128)
    assert list(read.ids) == tokenizer("upi payment failed")["input_ids"]


def test_a_huge_text_is_cut_at_both_ends_before_tokenising(tokenizer):
    huge = "upi " * 500_000 + "card stolen"
    cut = cut_text(huge, 128, "head_tail")
    assert len(cut) < 20_000 and cut.endswith("card stolen")
    (read,) = head_tail_pieces(tokenizer, [huge], 128)
    assert [huge[a:b] for a, b in read.offsets[-3:-1]] == ["card", "stolen"]


def test_a_batch_is_padded_and_masked(tokenizer):
    batch = encode_batch(tokenizer, [LONG, "loan"], 32, torch.device("cpu"), "head_tail")
    assert batch["input_ids"].shape == (2, 32)
    assert batch["attention_mask"].sum(1).tolist() == [32, 3]
    assert batch["input_ids"][1, 3:].eq(tokenizer.pad_token_id).all()


def test_the_classifier_reads_long_texts_by_head_and_tail(tiny_bert_result):
    trained = tiny_bert_result.neural
    options = {"max_length": 32, "precision": "fp32"}
    both = NeuralClassifier(
        trained.model, trained.tokenizer, trained.classes_, truncation="head_tail", **options
    )
    head = NeuralClassifier(trained.model, trained.tokenizer, trained.classes_, **options)
    batch = encode_batch(trained.tokenizer, [LONG], 32, torch.device("cpu"), "head_tail")
    with torch.no_grad():
        expected = torch.softmax(both._predictor(**batch).logits, -1).numpy()
    np.testing.assert_allclose(both.predict_proba([LONG]), expected, atol=1e-6)
    assert not np.allclose(both.predict_proba([LONG]), head.predict_proba([LONG]))


def test_long_texts_keep_their_head_unless_head_and_tail_is_asked_for():
    assert TrainConfig().truncation == "head" == TrainConfig(backbone="tiny").truncation
    assert TrainConfig(truncation="head_tail").truncation == "head_tail"
    with pytest.raises(ValueError, match="head of a long text"):
        TrainConfig(backbone="tiny", truncation="head_tail")


def test_explanations_read_the_text_as_the_classifier_does(tiny_bert_result):
    from core.analysis.explain import encode_text

    trained = tiny_bert_result.neural
    classifier = NeuralClassifier(trained.model, trained.tokenizer, trained.classes_,
                                       max_length=32, truncation="head_tail")  # fmt: skip
    encoded = encode_text(classifier, LONG)
    batch = encode_batch(trained.tokenizer, [LONG], 32, torch.device("cpu"), "head_tail")
    assert torch.equal(encoded.input_ids, batch["input_ids"])
    assert [LONG[a:b] for a, b in encoded.offsets[-4:-1]] == ["card", "stolen", "yesterday"]


def test_a_saved_model_reads_as_it_was_trained_and_old_cards_read_heads(tiny_bert_dir, tmp_path):
    import json

    from core.access import OPERATOR
    from core.models.registry import load_model, save_model
    from core.models.transformer.training import train_models
    from tests.conftest import make_dataset, separable_rows

    data = make_dataset(*separable_rows(4))
    config = TrainConfig(
        backbone=str(tiny_bert_dir), max_length=32, max_steps=1, device="cpu",
        truncation="head_tail",
    )  # fmt: skip
    folder = save_model(train_models(data, data, config), tmp_path, "m", actor=OPERATOR)
    assert load_model(folder).neural.truncation == "head_tail"
    card = json.loads((folder / "card.json").read_text())
    del card["train_config"]["truncation"]  # as a card saved before head_tail existed
    (folder / "card.json").write_text(json.dumps(card))
    assert load_model(folder).neural.truncation == "head"
