"""core.analysis.explain and its charts (core.charts.attention_maps, .explain, .explain_html,
.word_strip): attention maps, rollout, Integrated Gradients, the word merge, the side-by-side
result, what each chart shows and the escaped HTML, on a tiny random BERT and the tiny model."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.analysis.explain import (
    AttentionMaps,
    ExplainConfig,
    Explanation,
    TokenAttribution,
    attention_rollout,
    embedding_layer,
    encode_text,
    explain_text,
    merge_to_words,
    pad_baseline,
)
from core.charts.attention_maps import (
    GRID_GAP,
    GRID_MARGIN_PX,
    GRID_WIDTH,
    attention_grid_chart,
    attention_head_chart,
    cls_attention_chart,
    rollout_chart,
)
from core.charts.explain import word_scores_chart
from core.charts.explain_html import escaped_explanation_document, escaped_highlight_html
from core.charts.word_strip import word_strip_chart
from core.cli import main
from core.models.bag_of_words import BagOfWordsClassifier
from core.models.classifier import Prediction
from core.models.registry import load_model
from core.models.tiny.model import create_tiny_classifier
from core.models.transformer.backbone import load_backbone
from core.models.transformer.config import TrainConfig
from core.models.transformer.inference import NeuralClassifier
from core.progress import Cancelled
from core.text import word_spans
from tests.conftest import separable_rows

TEXT = "My UPI payment failed, money debited twice; the merchant refund is still pending."
TRICKY = "UPI ₹500 debited!! मेरा card x😀y <script>alert(1)</script> KYC's, Rs.2,000 पैसा"


@pytest.fixture(scope="module")
def corpus():
    return separable_rows(6)


@pytest.fixture(scope="module")
def bow(corpus):
    return BagOfWordsClassifier().fit(*corpus)


def _bert(tiny_bert_dir, corpus, pooling: str, max_length: int = 48) -> NeuralClassifier:
    torch.manual_seed(0)
    classes = sorted(set(corpus[1]))
    config = TrainConfig(backbone=str(tiny_bert_dir), pooling=pooling, max_length=max_length)
    model, tokenizer = load_backbone(config, classes)
    # fp32 like explain's own forward pass; "auto" picks bf16 on a CPU with AMX or AVX512-BF16.
    return NeuralClassifier(model, tokenizer, classes, max_length=max_length, precision="fp32")


def _tiny(corpus, pooling: str) -> NeuralClassifier:
    classes = sorted(set(corpus[1]))
    model, tokenizer = create_tiny_classifier(
        corpus[0], classes, pooling=pooling, n_layers=2, dropout=0.0, seed=1
    )
    return NeuralClassifier(model, tokenizer, classes, max_length=64, precision="fp32")


@pytest.fixture(scope="module", params=["bert-cls", "bert-mean", "tiny-cls", "tiny-mean"])
def neural(request, tiny_bert_dir, corpus):
    kind, pooling = request.param.split("-")
    return _bert(tiny_bert_dir, corpus, pooling) if kind == "bert" else _tiny(corpus, pooling)


@pytest.fixture(scope="module")
def bert_cls(tiny_bert_dir, corpus):
    return _bert(tiny_bert_dir, corpus, "cls")


def _config_shape(model) -> tuple[int, int]:
    config = model.config
    if hasattr(config, "n_layers"):  # the tiny model
        return config.n_layers, config.n_heads
    encoder = getattr(config, "encoder", None) or config
    return encoder.num_hidden_layers, encoder.num_attention_heads


def test_attention_shapes_match_the_model_and_rows_sum_to_one(neural, bow):
    expl = explain_text(neural, bow, TEXT, ExplainConfig(n_steps=8))
    maps = expl.attention
    layers, heads = _config_shape(neural.model)
    seq = len(encode_text(neural, TEXT).tokens)
    assert maps.weights.shape == (layers, heads, seq, seq)
    np.testing.assert_allclose(maps.weights.sum(axis=-1), 1.0, atol=1e-5)
    assert maps.cls_rows().shape == (layers, heads, seq)
    np.testing.assert_allclose(maps.rollout().sum(axis=-1), 1.0, atol=1e-9)
    assert len(maps.labels()) == seq and len(set(maps.labels())) == seq


def _centred(model, ids, mask, target: int) -> float:
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits[0].double()
    return float(logits[target] - logits.mean())


def test_attributions_sum_to_the_logit_gap_within_the_reported_delta(neural, bow):
    target = "Card Fraud"
    expl = explain_text(neural, bow, TEXT, ExplainConfig(target=target, n_steps=64))
    encoded = encode_text(neural, TEXT)
    index = list(neural.classes_).index(target)
    pad = int(neural.tokenizer.pad_token_id)
    gap = _centred(neural.model, encoded.input_ids, encoded.attention_mask, index) - _centred(
        neural.model, pad_baseline(encoded, pad), encoded.attention_mask, index
    )
    total = sum(expl.neural_scores) + expl.unassigned
    assert expl.logit_gap == pytest.approx(gap, abs=1e-4)  # the gap is measured, not assumed
    assert total - gap == pytest.approx(expl.delta, abs=1e-4)
    assert abs(total - gap) <= 0.05 * abs(gap) + 1e-3  # and 64 steps integrate it closely
    special = np.asarray(encoded.special)
    np.testing.assert_allclose(expl.tokens.scores[special], 0.0, atol=1e-6)  # [CLS]/[SEP] kept


def test_fewer_steps_report_a_larger_delta_not_a_wrong_sum(bert_cls, bow):
    coarse = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=2))
    fine = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=64))
    assert coarse.logit_gap == pytest.approx(fine.logit_gap, abs=1e-5)
    for expl in (coarse, fine):
        total = float(np.sum(expl.tokens.scores))
        assert total - expl.logit_gap == pytest.approx(expl.delta, abs=1e-6)
    assert abs(fine.delta) <= abs(coarse.delta) + 1e-6


def test_steps_are_added_until_the_delta_fits_and_never_past_the_limit(neural, bow):
    one_pass = explain_text(neural, bow, TEXT, ExplainConfig(n_steps=2, max_relative_delta=None))
    assert one_pass.tokens.n_steps == 2
    adaptive = explain_text(
        neural,
        bow,
        TEXT,
        ExplainConfig(n_steps=2, max_relative_delta=0.001, max_steps=256),
    )
    assert adaptive.relative_delta <= 0.001 < one_pass.relative_delta
    assert 2 < adaptive.tokens.n_steps <= 256 and adaptive.tokens.n_steps % 2 == 0
    assert adaptive.logit_gap == pytest.approx(one_pass.logit_gap, abs=1e-5)
    total = float(np.sum(adaptive.tokens.scores))
    assert total - adaptive.logit_gap == pytest.approx(adaptive.delta, abs=1e-6)
    capped = explain_text(
        neural, bow, TEXT, ExplainConfig(n_steps=2, max_relative_delta=1e-9, max_steps=10)
    )
    assert capped.tokens.n_steps <= 10


def test_adaptive_settings_are_checked():
    with pytest.raises(ValueError, match="max_steps"):
        ExplainConfig(n_steps=16, max_steps=8)
    with pytest.raises(ValueError, match="max_relative_delta"):
        ExplainConfig(max_relative_delta=0.0)


def test_words_follow_the_shared_word_grid_on_tricky_text(neural, bow):
    expl = explain_text(neural, bow, TRICKY, ExplainConfig(n_steps=4))
    spans = word_spans(TRICKY)
    assert [w.text for w in expl.words] == [s.text for s in spans]
    assert "UPI" in [w.text for w in expl.words]  # original casing kept
    assert len(expl.neural_scores) == len(expl.bow_scores) == len(spans)
    total = sum(expl.neural_scores) + expl.unassigned
    assert total == pytest.approx(float(expl.tokens.scores.sum()), abs=1e-9)
    assert all(expl.neural_seen)
    bow = bow.word_contributions(TRICKY, target=expl.target)
    assert expl.bow_scores == pytest.approx(bow.scores)


def test_merge_shares_a_token_across_the_words_it_spans():
    text = "ab x😀y ₹5"
    # tokens: [CLS], "ab", "x😀y" as one [UNK], "₹", "5", [SEP]
    offsets = [(0, 0), (0, 2), (3, 6), (7, 8), (8, 9), (0, 0)]
    assert text[3:6] == "x😀y"
    scores, seen, unassigned = merge_to_words(text, offsets, [9.0, 1.0, 3.0, 0.5, 2.0, 9.0])
    assert [s.text for s in word_spans(text)] == ["ab", "x", "y", "5"]
    np.testing.assert_allclose(scores, [1.0, 1.5, 1.5, 2.0])  # 2 of 3 characters are words
    assert unassigned == pytest.approx(0.5)  # "₹" belongs to no word
    assert seen.all()


def test_truncated_words_are_marked_unseen(tiny_bert_dir, corpus, bow):
    short = _bert(tiny_bert_dir, corpus, "cls", max_length=6)
    expl = explain_text(short, bow, TEXT, ExplainConfig(n_steps=4))
    assert expl.neural_seen[:4] == (True,) * 4
    assert not any(expl.neural_seen[4:])
    assert all(s == 0.0 for s in expl.neural_scores[4:])
    assert len(expl.bow_scores) == len(word_spans(TEXT))


def test_target_defaults_to_the_prediction_and_can_be_chosen(bert_cls, bow):
    default = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=4))
    assert default.target == default.neural.label
    assert default.neural.probabilities == pytest.approx(
        dict(zip(bert_cls.classes_, bert_cls.predict_proba([TEXT])[0], strict=True)), abs=1e-5
    )
    other = next(c for c in bert_cls.classes_ if c != default.target)
    chosen = explain_text(bert_cls, bow, TEXT, ExplainConfig(target=str(other), n_steps=4))
    assert chosen.target == other
    assert chosen.bow_scores == pytest.approx(
        bow.word_contributions(TEXT, target=str(other)).scores
    )
    with pytest.raises(ValueError, match="unknown target desk"):
        explain_text(bert_cls, bow, TEXT, ExplainConfig(target="Nope"))


def test_bad_input_is_refused_with_a_clear_message(bert_cls, bow):
    with pytest.raises(ValueError, match="no words"):
        explain_text(bert_cls, bow, "!!! 😀", ExplainConfig(n_steps=4))
    with pytest.raises(ValueError, match="n_steps"):
        ExplainConfig(n_steps=1)
    with pytest.raises(ValueError, match="internal_batch_size"):
        ExplainConfig(internal_batch_size=0)
    other = BagOfWordsClassifier().fit(["a b", "c d"], ["X", "Y"])
    with pytest.raises(ValueError, match="differ from the bag of words"):
        explain_text(bert_cls, other, TEXT)


def test_shared_model_keeps_no_hooks_and_internal_batches_agree(bert_cls, bow):
    whole = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=8))
    batched = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=8, internal_batch_size=3))
    np.testing.assert_allclose(batched.tokens.scores, whole.tokens.scores, atol=1e-5)
    layer = embedding_layer(bert_cls.model)
    assert not layer._forward_hooks and not layer._forward_pre_hooks
    assert not bert_cls.model.training


def test_rollout_follows_abnar_and_zuidema():
    one_layer = np.array([[[[0.2, 0.8], [0.6, 0.4]], [[1.0, 0.0], [0.0, 1.0]]]])  # (1, 2, 2, 2)
    mean = one_layer[0].mean(axis=0) + np.eye(2)
    np.testing.assert_allclose(attention_rollout(one_layer), mean / mean.sum(1, keepdims=True))
    rng = np.random.default_rng(0)
    raw = rng.random((3, 2, 4, 4))
    weights = raw / raw.sum(-1, keepdims=True)
    layers = [
        (w.mean(0) + np.eye(4)) / (w.mean(0) + np.eye(4)).sum(1, keepdims=True) for w in weights
    ]
    np.testing.assert_allclose(attention_rollout(weights), layers[2] @ layers[1] @ layers[0])
    with pytest.raises(ValueError, match="layers, heads, seq, seq"):
        attention_rollout(np.ones((2, 3, 3)))


def test_to_json_has_the_contract_keys_and_is_valid_json(bert_cls, bow):
    expl = explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=4))
    document = json.loads(json.dumps(expl.to_json(), allow_nan=False))
    assert {"words", "transformer_scores", "bow_scores", "transformer", "bow", "target"} <= set(
        document
    )
    assert {"delta", "attention"} <= set(document)
    assert len(document["transformer_scores"]) == len(document["words"])
    assert set(document["transformer"]) == {"label", "probabilities"}
    assert set(document["bow"]) == {"label", "probabilities"}
    assert document["attention"]["layers"] == 2 and document["attention"]["heads"] == 2
    assert document["attention"]["tokens"][0] == "[CLS]"


HOSTILE = '<img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/x.png) "quoted" UPI'


def test_html_escapes_every_word_and_label(bert_cls, bow):
    expl = explain_text(bert_cls, bow, HOSTILE, ExplainConfig(n_steps=4))
    fragment = escaped_highlight_html(expl)
    document = escaped_explanation_document(expl)
    for markup in (fragment, document):
        assert "<img" not in markup and "<script" not in markup
        assert "onerror=alert" not in markup.replace("onerror=alert(1)&gt;", "")
    assert "&lt;img src=x onerror=alert(1)&gt;" in document  # the text, shown as text
    assert "default-src 'none'" in document  # a downloaded file loads nothing
    assert fragment.count('title="') == 2 * len(expl.words)


def test_charts_build_and_carry_position_prefixed_labels(bert_cls, bow):
    expl = explain_text(bert_cls, bow, "card card card upi", ExplainConfig(n_steps=4))
    maps = expl.attention
    zoom = attention_head_chart(maps, 1, 0)
    assert sorted(set(zoom.data["query"])) == maps.labels()
    assert zoom.data["weight"].sum() == pytest.approx(len(maps.tokens), abs=1e-5)
    _assert_grid_shows(attention_grid_chart(maps), maps, n=len(maps.tokens))
    _assert_cls_rows_show(cls_attention_chart(maps), maps)
    _assert_rollout_shows(rollout_chart(maps), maps)
    bars = word_scores_chart(expl)
    _assert_word_bars_show(bars, expl, ["1 card", "2 card", "3 card", "4 upi"])
    with pytest.raises(ValueError, match="out of range"):
        attention_head_chart(maps, 5, 0)


def _assert_grid_shows(chart, maps: AttentionMaps, *, n: int) -> None:
    """One record per cell: every (layer, head) block of the first `n` tokens, each cell the
    weight of its (layer, head, query, key), placed by its head (x) and layer (y)."""
    data = chart.data
    layer, head = data["layer"].to_numpy() - 1, data["head"].to_numpy() - 1  # 1-based there
    query, key = data["query"].to_numpy(), data["key"].to_numpy()
    assert len(data) == maps.n_layers * maps.n_heads * n * n
    blocks = {(a, b) for a in range(maps.n_layers) for b in range(maps.n_heads)}
    assert set(zip(layer.tolist(), head.tolist(), strict=True)) == blocks
    assert query.max() == key.max() == n - 1
    np.testing.assert_array_equal(data["weight"], maps.weights[layer, head, query, key])
    step = n * (1 + GRID_GAP)
    np.testing.assert_allclose(data["x"], head * step + key)
    np.testing.assert_allclose(data["y"], layer * step + query)
    spec = chart.to_dict()
    assert spec["encoding"]["color"]["field"] == "weight"
    assert spec["title"]["text"] == f"Every head (first {n} tokens)"


def _assert_cls_rows_show(chart, maps: AttentionMaps) -> None:
    """One row per layer and head ("L1 H2", in model order): where position 0 looks."""
    data, labels = chart.data, maps.labels()
    order = [f"L{a + 1} H{b + 1}" for a in range(maps.n_layers) for b in range(maps.n_heads)]
    for name, (layer, head) in zip(order, np.ndindex(maps.n_layers, maps.n_heads), strict=True):
        row = data[data["head"] == name]
        assert list(row["key"]) == labels
        np.testing.assert_array_equal(row["weight"], maps.weights[layer, head, 0])
    spec = chart.to_dict()
    assert spec["encoding"]["y"]["sort"] == order and spec["encoding"]["x"]["sort"] == labels
    assert spec["title"] == "[CLS] attention, every head"


def _assert_rollout_shows(chart, maps: AttentionMaps) -> None:
    labels = maps.labels()
    matrix = chart.data.pivot(index="query", columns="key", values="weight").loc[labels, labels]
    np.testing.assert_allclose(matrix.to_numpy(), maps.rollout())
    assert chart.to_dict()["title"] == "Attention rollout"


def _assert_word_bars_show(chart, expl: Explanation, labels: list[str]) -> None:
    """Both models' scores per word, words in text order under their position-prefixed labels."""
    data = chart.data
    for model, scores in (("transformer", expl.neural_scores),
                          ("bag of words", expl.bow_scores)):  # fmt: skip
        rows = data[data["model"] == model]
        assert list(rows["word"]) == labels
        np.testing.assert_array_equal(rows["score"], scores)
    spec = chart.to_dict()
    assert spec["encoding"]["x"]["sort"] == labels and spec["encoding"]["row"]["field"] == "model"
    assert spec["encoding"]["y"]["field"] == "score"
    assert spec["title"] == f"Word scores for {expl.target}"


def _random_maps(layers: int, heads: int, seq: int) -> AttentionMaps:
    weights = np.random.default_rng(0).dirichlet(np.ones(seq), size=(layers, heads, seq))
    return AttentionMaps(tuple(f"t{i}" for i in range(seq)), weights, has_cls=True)


def _evaluate(expression: str, datum: SimpleNamespace):
    """A Vega expression of this chart's simple kind (arithmetic, round) in Python."""
    return eval(expression, {"__builtins__": {}, "round": round}, {"datum": datum})


@pytest.mark.parametrize(("layers", "heads"), [(6, 12), (1, 4)])  # MiniLM, the tiny model
def test_grid_is_one_view_that_fits_the_column_with_every_head(layers, heads):
    n = 8  # 6 × 12 heads of 8 × 8 cells: under Altair's 5,000 rows
    chart = attention_grid_chart(_random_maps(layers, heads, n))
    spec = chart.to_dict()
    assert "facet" not in spec and spec["autosize"]["type"] == "fit-x"  # can follow the column
    assert chart.width <= GRID_WIDTH  # the main column of a 1,400-px window: all heads fit
    assert "transform" not in spec  # the cells' corners are data: no formula per cell
    cells = SimpleNamespace(**{c: chart.data[c] for c in chart.data.columns})
    extents = {}
    for channel, count in (("x", heads), ("y", layers)):
        encoding = spec["encoding"][channel]
        axis, (low, high) = encoding["axis"], encoding["scale"]["domain"]
        labels = [_evaluate(axis["labelExpr"], SimpleNamespace(value=v)) for v in axis["values"]]
        assert labels == list(range(1, count + 1))
        start, end = getattr(cells, channel), getattr(cells, f"{channel}2")
        assert start.min() == low and end.max() == high  # the last head ends at the edge
        extents[channel] = high - low
    per_token = (chart.width - GRID_MARGIN_PX) / extents["x"], chart.height / extents["y"]
    assert per_token[0] == pytest.approx(per_token[1], rel=0.02)  # square cells


def _hand_explanation(maps: AttentionMaps) -> Explanation:
    """Three words with chosen scores over `maps` (4 tokens: a [CLS] and one token per word);
    the last word cut off by truncation."""
    text = "card fee upi"
    return Explanation(
        text=text, words=tuple(word_spans(text)),
        neural_scores=(0.5, -0.25, 0.0), bow_scores=(-1.0, 0.75, 0.125),
        neural_seen=(True, True, False),
        neural=Prediction("Card Fraud", {"Card Fraud": 0.7, "UPI Dispute": 0.3}),
        bow=Prediction("UPI Dispute", {"Card Fraud": 0.4, "UPI Dispute": 0.6}),
        target="Card Fraud", unassigned=0.0, bow_intercept=0.0,
        tokens=TokenAttribution(maps.tokens, np.zeros(4), 0.25, 0.0, 2),
        token_offsets=((0, 0), (0, 4), (5, 8), (9, 12)), attention=maps,
    )  # fmt: skip


def test_charts_show_the_numbers_of_a_hand_built_explanation():
    maps = _random_maps(2, 3, 4)
    expl = _hand_explanation(maps)
    _assert_grid_shows(attention_grid_chart(maps), maps, n=4)
    _assert_grid_shows(attention_grid_chart(maps, max_tokens=2), maps, n=2)  # a corner of each
    _assert_cls_rows_show(cls_attention_chart(maps), maps)
    _assert_rollout_shows(rollout_chart(maps), maps)
    _assert_word_bars_show(word_scores_chart(expl), expl, ["1 card", "2 fee", "3 upi"])
    strip = word_strip_chart(expl).layer[0].data  # the cells: each row over its largest |score|
    cells = strip[["model", "word", "shade", "seen"]].itertuples(index=False, name=None)
    assert list(cells) == [
        ("Transformer", "card", 1.0, True), ("Transformer", "fee", -0.5, True),
        ("Transformer", "upi", 0.0, False),  # cut off: no shade
        ("Bag of words", "card", -1.0, True), ("Bag of words", "fee", 0.75, True),
        ("Bag of words", "upi", 0.125, True),
    ]  # fmt: skip


def test_the_explanation_keeps_the_offsets_of_the_tokens_it_read(neural, bow):
    """The presenter's story finds the order words among the attention's tokens by them."""
    expl = explain_text(neural, bow, TRICKY, ExplainConfig(max_relative_delta=None))
    assert expl.token_offsets == encode_text(neural, expl.text).offsets
    assert len(expl.token_offsets) == len(expl.attention.tokens) == len(expl.tokens.tokens)


def test_cli_explain_prints_the_contract_json(tiny_model_dir, capsys):
    code = main(["explain", "--model", str(tiny_model_dir), "UPI payment failed, ₹500", "--json"])
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    assert document["words"] == ["UPI", "payment", "failed", "500"]
    assert len(document["transformer_scores"]) == len(document["bow_scores"]) == 4
    assert document["target"] == document["transformer"]["label"]
    assert set(document["attention"]) >= {"layers", "heads", "tokens"}
    blend = load_model(tiny_model_dir).blend
    decision = document["decision"]
    assert decision["decided_by"] == blend.decided_by
    expected = blend.decide(
        Prediction(document["transformer"]["label"], document["transformer"]["probabilities"]),
        Prediction(document["bow"]["label"], document["bow"]["probabilities"]),
    )
    assert decision["label"] == expected.label
    assert decision["probabilities"] == pytest.approx(expected.probabilities)


def test_cli_explain_text_output_and_one_line_errors(tiny_model_dir, tmp_path, capsys):
    assert main(["explain", "--model", str(tiny_model_dir), "kyc documents rejected"]) == 0
    printed = capsys.readouterr().out
    assert "bag of words" in printed and printed.startswith("decision: ")
    for argv in (
        ["explain", "--model", str(tmp_path), "kyc"],  # a folder that is not a model
        ["explain", "--model", str(tiny_model_dir), "?!"],  # no words
        ["explain", "--model", str(tiny_model_dir), "kyc", "--target", "Nope"],
        ["explain", "--model", str(tiny_model_dir), "kyc", "--steps", "1"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err


def test_the_explain_command_states_the_config_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    config = ExplainConfig()
    assert f"(default {config.n_steps})" in shown
    assert f"(default {config.max_steps})" in shown
    assert f"(default {config.max_relative_delta}; 0: one pass)" in shown


def test_a_cancelled_explanation_stops_between_integration_steps(bert_cls, bow):
    """The Explain page's short-lane work gives its worker back when its caller gives up."""
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=8), cancel=cancel)
    assert explain_text(bert_cls, bow, TEXT, ExplainConfig(n_steps=8)).target  # unset: runs
