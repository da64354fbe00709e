"""Order ablation on a tiny random BERT built from a config (no download)."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

from core.analysis.order_ablation import (
    VARIANTS,
    order_ablation,
    shuffled_position_ids,
    single_position_ids,
)
from core.charts.probe_tables import order_ablation_table

WORDS = ["india", "defeated", "australia", "paid", "by", "card", "not", "upi", "refund", "##s"]
LABELS = ["Card Fraud", "Other", "UPI Dispute"]


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-bert")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("\n".join(specials + WORDS) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(folder)
    config = BertConfig(
        vocab_size=len(specials) + len(WORDS),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.5,  # larger than BERT's 0.02 so that order visibly matters
        num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)),
        label2id={label: i for i, label in enumerate(LABELS)},
    )
    torch.manual_seed(0)
    return BertForSequenceClassification(config).eval(), tokenizer


def test_three_variants_with_valid_probabilities(bert):
    model, tokenizer = bert
    result = order_ablation(model, tokenizer, "Paid by card not by UPI", seed=3)
    assert result.tokens == ("[CLS]", "paid", "by", "card", "not", "by", "upi", "[SEP]")
    assert [v.variant for v in result.variants] == list(VARIANTS)
    for variant in result.variants:
        assert set(variant.prediction.probabilities) == set(LABELS)
        assert sum(variant.prediction.probabilities.values()) == pytest.approx(1.0, abs=1e-6)
        assert variant.prediction.label == max(
            variant.prediction.probabilities, key=variant.prediction.probabilities.get
        )
        assert len(variant.position_ids) == 8
    assert result.normal.position_ids == tuple(range(8))
    assert result.single_position.position_ids == (0,) * 8
    shuffled = result.shuffled.position_ids
    assert shuffled[0] == 0 and shuffled[-1] == 7  # [CLS] and [SEP] keep their places
    assert sorted(shuffled) == list(range(8)) and shuffled != tuple(range(8))


def test_table_has_one_row_per_variant(bert):
    table = order_ablation_table(order_ablation(*bert, "india defeated australia"))
    assert table["variant"].tolist() == list(VARIANTS)
    assert table.columns.tolist() == ["variant", "label", *LABELS]
    np.testing.assert_allclose(table[LABELS].sum(axis=1), 1.0, rtol=1e-6)


def test_shuffled_positions_are_seeded_and_spare_special_tokens():
    mask = [1, 0, 0, 0, 0, 0, 1, 1]  # [CLS] five words [SEP] [PAD]
    a = shuffled_position_ids(mask, seed=1)
    np.testing.assert_array_equal(a, shuffled_position_ids(mask, seed=1))
    assert a[0] == 0 and a[6] == 6 and a[7] == 7
    assert sorted(a[1:6]) == [1, 2, 3, 4, 5]
    np.testing.assert_array_equal(single_position_ids(3), [0, 0, 0])


def _cls_output(model, input_ids, position_ids):
    with torch.no_grad():
        out = model(
            input_ids=torch.tensor([input_ids]),
            position_ids=torch.tensor([position_ids]),
            output_hidden_states=True,
        )
    return out.hidden_states[-1][0, 0]


def test_one_position_makes_cls_blind_to_wordpiece_order(bert):
    model, tokenizer = bert
    ids = tokenizer("paid by card not by upi refunds")["input_ids"]
    rng = np.random.default_rng(0)
    inner = ids[1:-1]
    for _ in range(3):
        permuted = [ids[0], *rng.permutation(inner).tolist(), ids[-1]]
        same = single_position_ids(len(ids)).tolist()
        torch.testing.assert_close(
            _cls_output(model, permuted, same), _cls_output(model, ids, same), atol=1e-5, rtol=0
        )
        normal = list(range(len(ids)))
        diff = _cls_output(model, permuted, normal) - _cls_output(model, ids, normal)
        assert diff.abs().max() > 1e-3


def test_swapped_subject_and_object_differ_only_with_positions(bert):
    model, tokenizer = bert
    a = order_ablation(model, tokenizer, "India defeated Australia")
    b = order_ablation(model, tokenizer, "Australia defeated India")
    pa, pb = (np.array(list(r.single_position.prediction.probabilities.values())) for r in (a, b))
    np.testing.assert_allclose(pa, pb, atol=1e-6)
    na, nb = (np.array(list(r.normal.prediction.probabilities.values())) for r in (a, b))
    assert np.abs(na - nb).max() > 1e-4


def test_model_must_be_in_eval_mode_and_take_position_ids(bert):
    model, tokenizer = bert
    with pytest.raises(RuntimeError, match="eval"):
        order_ablation(model.train(), tokenizer, "paid by card")
    model.eval()

    class NoPositions(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2)

        def forward(self, input_ids, attention_mask=None):
            return self.layer(input_ids.float())

    with pytest.raises(ValueError, match="position_ids"):
        order_ablation(NoPositions().eval(), tokenizer, "paid by card")
    with pytest.raises(ValueError, match="no words"):
        order_ablation(model, tokenizer, "   ")


def test_mean_pooled_head_takes_position_ids_too(bert):
    from core.models.transformer.head import MeanPoolConfig, MeanPoolForSequenceClassification

    model, tokenizer = bert
    torch.manual_seed(0)
    head = MeanPoolForSequenceClassification(
        MeanPoolConfig(
            encoder=model.config, id2label=model.config.id2label,
            label2id=model.config.label2id,
        ),
        encoder=model.bert,
    ).eval()  # fmt: skip
    a = order_ablation(head, tokenizer, "India defeated Australia")
    b = order_ablation(head, tokenizer, "Australia defeated India")
    pa, pb = (np.array(list(r.single_position.prediction.probabilities.values())) for r in (a, b))
    np.testing.assert_allclose(pa, pb, atol=1e-6)  # mean pooling + one position: a bag
    na, nb = (np.array(list(r.normal.prediction.probabilities.values())) for r in (a, b))
    assert np.abs(na - nb).max() > 1e-4


@pytest.mark.parametrize("truncation", ["head", "head_tail"])
def test_a_long_complaint_is_cut_as_the_model_reads_it(bert, truncation):
    from core.models.transformer.inference import NeuralClassifier

    model, tokenizer = bert
    text = "paid by card " * 20 + "not by upi refund"  # 66 word pieces, cut to 16
    result = order_ablation(model, tokenizer, text, max_length=16, truncation=truncation)
    reads_end = result.tokens[-5:] == ("not", "by", "upi", "refund", "[SEP]")
    assert reads_end == (truncation == "head_tail") and len(result.tokens) == 16
    classifier = NeuralClassifier(
        model, tokenizer, LABELS, max_length=16, device="cpu", precision="fp32",
        truncation=truncation,
    )  # fmt: skip
    own = classifier.predict_proba([text])[0]
    normal = [result.normal.prediction.probabilities[label] for label in LABELS]
    np.testing.assert_allclose(normal, own, atol=1e-5)  # the normal variant is the model's call
