"""The worked self-attention example, positional encoding, cost helpers and attention-lab charts."""

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts_attention import (
    cost_chart,
    matrix_heatmap,
    positional_encoding_heatmap,
    timing_chart,
)
from core.toy_attention import (
    STEP_NAMES,
    attention_ops,
    cost_table,
    multi_head_attention,
    positional_encoding,
    recurrent_ops,
    self_attention,
    step_table,
    step_tables,
    textbook_example,
    time_attention_vs_lstm,
    unique_labels,
    weight_changes,
)


def test_textbook_output_and_first_row_weights():
    steps = textbook_example()
    assert steps.tokens == ("UPI", "failed", "instantly")
    assert steps.d_k == 2
    np.testing.assert_allclose(
        steps.output, [[0.599, 1.401], [0.802, 1.401], [0.752, 1.503]], atol=5e-4
    )
    np.testing.assert_allclose(steps.weights[0], [0.1978, 0.4011, 0.4011], atol=5e-5)


def test_textbook_intermediate_steps_by_hand():
    steps = textbook_example()
    np.testing.assert_array_equal(steps.Q, [[1, 0], [0, 1], [1, 1]])
    np.testing.assert_array_equal(steps.K, [[0, 1], [1, 0], [1, 1]])
    np.testing.assert_array_equal(steps.V, [[1, 1], [0, 1], [1, 2]])
    np.testing.assert_array_equal(steps.scores, [[0, 1, 1], [1, 0, 1], [1, 1, 2]])
    np.testing.assert_allclose(steps.scaled, steps.scores / np.sqrt(2))


def test_appending_again_reweights_every_token():
    steps = textbook_example(append_again=True)
    assert steps.tokens[-1] == "again"
    np.testing.assert_allclose(steps.output[0], [0.141, 1.000], atol=5e-4)
    np.testing.assert_allclose(steps.weights[0], [0.1412, 0.2863, 0.2863, 0.2863], atol=5e-5)
    changes = weight_changes(textbook_example(), steps)
    old = changes.dropna()
    assert len(changes) == 16 and len(old) == 9
    assert (old["change"] < 0).all()  # the new key takes weight from every old one
    assert changes.loc[0, ["query", "key"]].tolist() == ["UPI", "UPI"]
    assert changes.loc[0, "change"] == pytest.approx(0.1412 - 0.1978, abs=1e-4)


def test_column_vector_convention_would_not_reproduce_the_textbook():
    # Documented choice: rows are tokens and Q = X·W. With W·x the outputs swap columns.
    steps = self_attention(
        textbook_example().X,
        np.eye(2),
        np.array([[0, 1], [1, 0]]).T,
        np.array([[1, 1], [0, 1]]).T,
    )
    assert not np.allclose(steps.output[0], [0.599, 1.401], atol=5e-3)


def test_weights_are_probabilities_on_random_input():
    rng = np.random.default_rng(0)
    steps = self_attention(rng.normal(size=(5, 4)), *(rng.normal(size=(4, 3)) for _ in range(3)))
    assert steps.weights.shape == (5, 5)
    np.testing.assert_allclose(steps.weights.sum(axis=1), 1.0)
    assert (steps.weights > 0).all()
    assert steps.tokens == ("t1", "t2", "t3", "t4", "t5")


def test_multi_head_concatenates_heads_then_projects():
    base = textbook_example()
    mh = multi_head_attention(
        base.X,
        [base.W_Q, np.eye(2)],
        [base.W_K, np.eye(2)],
        [base.W_V, np.eye(2)],
        np.eye(4)[:, :3],
        tokens=base.tokens,
    )
    assert len(mh.heads) == 2
    np.testing.assert_allclose(mh.heads[0].output, base.output)
    np.testing.assert_allclose(mh.concat[:, :2], base.output)
    np.testing.assert_allclose(mh.concat[:, 2:], mh.heads[1].weights @ base.X)
    assert mh.output.shape == (3, 3)
    np.testing.assert_allclose(mh.output, mh.concat[:, :3])


def test_multi_head_rejects_mismatched_heads_and_output_projection():
    x = np.eye(2)
    with pytest.raises(ValueError, match="one of each per head"):
        multi_head_attention(x, [x, x], [x], [x], np.eye(4))
    with pytest.raises(ValueError, match="W_O has 3 rows"):
        multi_head_attention(x, [x, x], [x, x], [x, x], np.eye(3))


def test_positional_encoding_values():
    pe = positional_encoding(50, 8)
    assert pe.shape == (50, 8)
    np.testing.assert_allclose(pe[0], [0, 1, 0, 1, 0, 1, 0, 1])
    pos, i, d = 7, 1, 8
    assert pe[pos, 2 * i] == pytest.approx(np.sin(pos / 10000 ** (2 * i / d)))
    assert pe[pos, 2 * i + 1] == pytest.approx(np.cos(pos / 10000 ** (2 * i / d)))
    assert pe[3, 0] == pytest.approx(np.sin(3.0))
    assert np.abs(pe).max() <= 1.0
    assert positional_encoding(4, 5).shape == (4, 5)  # odd width: last column is a sine
    assert positional_encoding(4, 5)[2, 4] == pytest.approx(np.sin(2 / 10000 ** (4 / 5)))


def test_step_tables_are_labelled_by_tokens():
    tables = step_tables(textbook_example())
    assert tuple(tables) == STEP_NAMES
    weights = tables["weights"]
    assert list(weights.index) == ["UPI", "failed", "instantly"]
    assert list(weights.columns) == ["UPI", "failed", "instantly"]
    assert weights.loc["UPI", "failed"] == pytest.approx(0.4011, abs=5e-5)
    assert list(tables["output"].columns) == ["z1", "z2"]
    assert list(tables["W_K"].index) == ["x1", "x2"] and list(tables["W_K"].columns) == ["k1", "k2"]
    assert tables["Q"].loc["instantly"].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="unknown step"):
        step_table(textbook_example(), "softmax")


def test_repeated_tokens_get_distinct_labels():
    assert unique_labels(["by", "card", "by"]) == ["by", "card", "by#2"]
    steps = self_attention(np.eye(3), np.eye(3), np.eye(3), np.eye(3), tokens=["by", "card", "by"])
    assert list(step_table(steps, "scores").columns) == ["by", "card", "by#2"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"X": [[1, 0, 2]]}, "W_Q has 2 rows but X has 3 columns"),
        ({"W_K": [[1, 0, 0], [0, 1, 0]]}, "same width d_k"),
        ({"X": [[1, "a"]]}, "X must be a matrix of numbers"),
        ({"W_V": [[1, np.nan], [0, 1]]}, "missing or infinite"),
        ({"X": [1, 0]}, "non-empty 2-D matrix"),
        ({"tokens": ["only", "two"]}, "got 2 tokens for 3 rows"),
    ],
)
def test_edited_matrices_are_validated(kwargs, message):
    base = textbook_example()
    args = {"X": base.X, "W_Q": base.W_Q, "W_K": base.W_K, "W_V": base.W_V, "tokens": None}
    args.update(kwargs)
    tokens = args.pop("tokens")
    with pytest.raises(ValueError, match=message):
        self_attention(**args, tokens=tokens)


def test_textbook_operation_counts():
    assert attention_ops(500, 768) == 192_000_000  # 1.92 × 10⁸
    assert recurrent_ops(500, 768) == 294_912_000  # 2.95 × 10⁸
    table = cost_table([100, 500, 2000], d=768)
    assert table.shape == (6, 3)
    at = table.set_index(["n", "layer"])["ops"]
    assert at[(500, "self-attention (n²·d)")] < at[(500, "recurrent (n·d²)")]
    assert at[(2000, "self-attention (n²·d)")] > at[(2000, "recurrent (n·d²)")]  # crossover n = d


def test_timing_table_shape():
    table = time_attention_vs_lstm([4, 8], d=16, heads=2, repeats=1)
    assert table.columns.tolist() == ["n", "layer", "seconds"]
    assert sorted(table["layer"].unique()) == ["LSTM", "self-attention"]
    assert len(table) == 4 and (table["seconds"] > 0).all()
    with pytest.raises(ValueError, match="divisible"):
        time_attention_vs_lstm([4], d=10, heads=3)


def test_chart_builders_serialise():
    steps = textbook_example()
    timing = pd.DataFrame(
        {"n": [8, 16, 8, 16], "layer": ["a", "a", "b", "b"], "seconds": [1e-4, 2e-4, 3e-4, 9e-4]}
    )
    charts = [
        matrix_heatmap(step_table(steps, "weights"), title="weights"),
        matrix_heatmap(step_table(steps, "W_V")),
        positional_encoding_heatmap(positional_encoding(16, 8)),
        cost_chart(cost_table([10, 100, 1000])),
        timing_chart(timing),
    ]
    for chart in charts:
        assert isinstance(chart, alt.Chart | alt.LayerChart)
        spec = chart.to_dict()
        assert "$schema" in spec
    heat = charts[0].to_dict()
    assert [layer["mark"]["type"] for layer in heat["layer"]] == ["rect", "text"]
    cells = next(iter(heat["datasets"].values()))
    assert len(cells) == 9 and {"row", "column", "value"} <= set(cells[0])


def test_chart_builders_reject_unusable_input():
    with pytest.raises(ValueError, match="columns"):
        cost_chart(pd.DataFrame({"n": [1]}))
    with pytest.raises(ValueError, match="empty"):
        matrix_heatmap(pd.DataFrame())
    with pytest.raises(ValueError, match="positions, d_model"):
        positional_encoding_heatmap(np.zeros(3))
