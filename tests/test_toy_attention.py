"""The worked self-attention example, positional encoding, cost helpers and attention-lab charts."""

import altair as alt
import numpy as np
import pandas as pd
import pytest

from core.charts.attention import (
    cost_chart,
    matrix_heatmap,
    positional_encoding_heatmap,
    timing_chart,
    weight_change_chart,
)
from core.lab.self_attention import (
    AGAIN_TOKEN,
    AGAIN_X,
    AVERAGE_HEADS_W_O,
    SECOND_HEAD_W_K,
    SECOND_HEAD_W_Q,
    SECOND_HEAD_W_V,
    STEP_NAMES,
    TimingConfig,
    append_token,
    attention_ops,
    cost_table,
    measure_attention_vs_lstm,
    multi_head_attention,
    output_formula,
    recurrent_ops,
    scientific,
    self_attention,
    softmax_formula,
    step_table,
    step_tables,
    textbook_example,
    time_attention_vs_lstm,
    tokens_and_matrix,
    unique_labels,
    weight_changes,
)
from core.numeric import positional_encoding


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


def _token_table(tokens, rows) -> pd.DataFrame:
    return pd.DataFrame({"token": tokens, "x1": [r[0] for r in rows], "x2": [r[1] for r in rows]})


def test_tokens_and_matrix_reads_an_edited_table():
    tokens, X = tokens_and_matrix(_token_table([" UPI ", "failed"], [(1, 0), (0, 1)]))
    assert tokens == ("UPI", "failed")
    np.testing.assert_array_equal(X, [[1.0, 0.0], [0.0, 1.0]])
    default = step_table(textbook_example(), "X").reset_index(names="token")
    tokens, X = tokens_and_matrix(default)
    assert tokens == ("UPI", "failed", "instantly")
    np.testing.assert_array_equal(X, textbook_example().X)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (_token_table(["a", None], [(1, 0), (0, 1)]), "row 2 of X has no token name"),
        (_token_table(["a", "  "], [(1, 0), (0, 1)]), "row 2 of X has no token name"),
        (_token_table(["a", "b"], [(1, 0), (None, 1)]), "missing or infinite"),
        (_token_table([], []), "add at least one token"),
        (pd.DataFrame({"x1": [1.0]}), "needs a 'token' column"),
    ],
)
def test_tokens_and_matrix_rejects_unusable_tables(frame, message):
    with pytest.raises(ValueError, match=message):
        tokens_and_matrix(frame)


def test_append_token_equals_the_textbook_again_example():
    appended = append_token(textbook_example(), AGAIN_TOKEN, AGAIN_X)
    expected = textbook_example(append_again=True)
    assert appended.tokens == expected.tokens
    np.testing.assert_allclose(appended.weights, expected.weights)
    np.testing.assert_allclose(appended.output, expected.output)
    with pytest.raises(ValueError, match="has 3 values but the tokens have 2"):
        append_token(textbook_example(), "x", (1.0, 2.0, 3.0))


def test_hand_check_formulas_show_the_textbook_numbers():
    steps = textbook_example()
    assert softmax_formula(steps) == (
        "e^s = [1.0000, 2.0281, 2.0281], sum = 5.0562; "
        "weights = e^s / sum = [0.1978, 0.4011, 0.4011]"
    )
    assert output_formula(steps) == (
        "z = 0.1978 × [1.000, 1.000] + 0.4011 × [0.000, 1.000] + 0.4011 × [1.000, 2.000] "
        "= [0.599, 1.401]"
    )
    again = textbook_example(append_again=True)
    assert output_formula(again).endswith("0.2863 × [-1.000, 0.000] = [0.141, 1.000]")
    huge = self_attention([[100.0, 0.0], [0.0, 100.0]], np.eye(2), np.eye(2), np.eye(2))
    formula = softmax_formula(huge)
    assert formula.startswith("e^(s − max s) = [1.0000, 0.0000]") and "inf" not in formula


def test_scientific_notation():
    assert scientific(attention_ops(500, 768)) == "1.92×10⁸"
    assert scientific(recurrent_ops(500, 768)) == "2.95×10⁸"
    assert scientific(1.79e-7) == "1.79×10⁻⁷"
    assert scientific(5) == "5.00"
    assert scientific(0.0) == "0"
    assert scientific(123456, digits=1) == "1×10⁵"
    with pytest.raises(ValueError, match="digits"):
        scientific(1.0, digits=0)


def test_second_head_defaults_fit_the_textbook_example():
    base = textbook_example()
    mh = multi_head_attention(
        base.X,
        [base.W_Q, SECOND_HEAD_W_Q],
        [base.W_K, SECOND_HEAD_W_K],
        [base.W_V, SECOND_HEAD_W_V],
        AVERAGE_HEADS_W_O,
        tokens=base.tokens,
    )
    np.testing.assert_allclose(mh.output, (mh.heads[0].output + mh.heads[1].output) / 2)
    assert not np.allclose(mh.heads[0].weights, mh.heads[1].weights)


def test_timing_config_and_measurement():
    assert TimingConfig().ns == (16, 32, 64, 128, 256, 512)
    config = TimingConfig(min_n=4, max_n=12, d=16, heads=2, repeats=1)
    assert config.ns == (4, 8)
    result = measure_attention_vs_lstm(config)
    assert result.config == config
    assert result.table["n"].tolist() == [4, 4, 8, 8]
    assert result.threads >= 1 and result.total_seconds > 0
    assert len(result.measured_at) == len("2026-01-01 12:00:00")
    with pytest.raises(ValueError, match="min_n"):
        measure_attention_vs_lstm(TimingConfig(min_n=32, max_n=16))


def test_weight_change_chart_has_a_point_per_weight():
    changes = weight_changes(textbook_example(), textbook_example(append_again=True))
    spec = weight_change_chart(changes).to_dict()
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["rule", "point"]
    sizes = sorted(len(rows) for rows in spec["datasets"].values())
    assert sizes == [9, 32]  # 9 old pairs get a rule; 16 pairs × (before, after) points
    with pytest.raises(ValueError, match="columns"):
        weight_change_chart(changes.drop(columns="change"))
