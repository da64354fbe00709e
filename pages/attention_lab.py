"""Attention lab: self-attention worked out by hand, positional encoding, and attention's cost."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.charts.attention import (
    cost_chart,
    matrix_heatmap,
    positional_encoding_heatmap,
    timing_chart,
    weight_change_chart,
)
from core.errors import UserError
from core.lab.self_attention import (
    AGAIN_TOKEN,
    AGAIN_X,
    AVERAGE_HEADS_W_O,
    SECOND_HEAD_W_K,
    SECOND_HEAD_W_Q,
    SECOND_HEAD_W_V,
    TOKEN_COLUMN,
    AttentionSteps,
    MultiHeadSteps,
    TimingConfig,
    TimingResult,
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
    textbook_example,
    tokens_and_matrix,
    weight_changes,
)
from core.lab.word_order import WordOrderDemo, word_order_demo
from core.numeric import positional_encoding
from ui.auth import current_actor
from ui.errors import guarded
from ui.figures import show_chart
from ui.jobs import run_short
from ui.lstm import render_trained_order_models
from ui.presenter import presenter_on, presenter_sections
from ui.safe import md_escape

# Page-local session key (like data.source): the last TimingResult, so that the chart survives
# reruns caused by other widgets without timing again.
TIMING = "attention.timing"
PROJECTIONS = ("W_Q", "W_K", "W_V")
EDITOR_KEYS = ("attention.X", *(f"attention.{name}" for name in PROJECTIONS))
# Weights get four decimals (the textbook prints 0.1978); everything else three (0.599).
DECIMALS = {"scaled": 4, "weights": 4}
DEFAULT_DECIMALS = 3
STEP_LINES = {
    "Q": "Queries Q = X·W_Q: what each token is looking for.",
    "K": "Keys K = X·W_K: what each token offers to be matched on.",
    "V": "Values V = X·W_V: what each token passes on when it is attended to.",
    "scores": "Scores Q·Kᵀ: row i, column j is the dot product of query i with key j.",
    "scaled": "Scaled scores ÷ √d_k, so that wide vectors do not push the softmax to extremes.",
    "weights": "Softmax of each row: how much each token attends to every token; rows sum to 1.",
    "output": "Output = weights·V: each token's new vector, a weighted average of the values.",
}
DEMO_TEXTS = ("India defeated Australia", "Australia defeated India")
POOLED_DIMS_SHOWN = 4  # of the tiny model's 64: enough to see equal or different rows
TIMING_MAX_NS = (64, 128, 256, 512, 1024)
TIMING_WIDTHS = (64, 128, 256, 512, 768)
TIMING_HEADS = 8  # divides every width offered
PRESENTER_TITLES = (
    "Self-attention, worked by hand",
    "Two heads look at the same tokens",
    "Without positions, word order is invisible",
    "What attention costs, against an LSTM",
    "An LSTM reads order too: trained beside attention",
)


# --------------------------------------------------------------------------- rendering helpers


def render_matrix(frame: pd.DataFrame, *, decimals: int = DEFAULT_DECIMALS) -> None:
    """A matrix as a static table of fixed-decimal text, so every number is in the page.

    st.table renders Markdown in every cell, so labels (user-typed token names) are escaped.
    """
    text = frame.map(lambda value: f"{value + 0.0:.{decimals}f}")  # + 0.0 turns -0.0 into 0.0
    text.index = [md_escape(label) for label in frame.index]
    text.columns = [md_escape(label) for label in frame.columns]
    st.table(text)


def render_step(steps: AttentionSteps, name: str) -> None:
    st.markdown(f"**{name}**")
    st.caption(STEP_LINES[name])
    render_matrix(step_table(steps, name), decimals=DECIMALS.get(name, DEFAULT_DECIMALS))


def labelled(matrix, rows: list[str], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(matrix, index=rows, columns=columns)


# --------------------------------------------------------------------------- worked example


def reset_editors() -> None:
    for key in EDITOR_KEYS:
        st.session_state.pop(key, None)


def small_columns(frame: pd.DataFrame) -> dict:
    """Column config that keeps a 2-column matrix editor narrow enough for a third of the page."""
    config = {name: st.column_config.NumberColumn(width="small") for name in frame.columns}
    return {"_index": st.column_config.Column(width="small"), **config}


def render_x_editor(base: AttentionSteps) -> pd.DataFrame:
    st.markdown("**X**: one row per token")
    x_default = step_table(base, "X").reset_index(names=TOKEN_COLUMN)
    x_default.columns.name = None
    return st.data_editor(
        x_default,
        key="attention.X",
        num_rows="dynamic",
        hide_index=True,
        column_config={TOKEN_COLUMN: st.column_config.TextColumn("token", required=True)},
    )


def render_projection_editors(
    base: AttentionSteps, *, key_prefix: str = "attention.", note: str = ": one row per column of X"
) -> dict[str, pd.DataFrame]:
    """One editor per projection matrix (W_Q, W_K, W_V) of `base`, side by side."""
    projections = {}
    for name, column in zip(PROJECTIONS, st.columns(3), strict=True):
        frame = step_table(base, name).rename_axis(index=None, columns=None)
        column.markdown(f"**{name}**{note}")
        projections[name] = column.data_editor(
            frame, key=f"{key_prefix}{name}", column_config=small_columns(frame)
        )
    return projections


def compute_steps(x_table: pd.DataFrame, projections: dict[str, pd.DataFrame]) -> AttentionSteps:
    tokens, X = tokens_and_matrix(x_table)
    return self_attention(X, *(projections[name] for name in PROJECTIONS), tokens=tokens)


def render_softmax(steps: AttentionSteps) -> None:
    render_step(steps, "weights")
    st.caption(f"Row 1 ({md_escape(steps.tokens[0])}) by hand:")
    st.text(softmax_formula(steps))


def render_output(steps: AttentionSteps) -> None:
    render_step(steps, "output")
    st.caption(f"z for row 1 ({md_escape(steps.tokens[0])}) by hand:")
    st.text(output_formula(steps))


def render_steps(steps: AttentionSteps) -> None:
    """Q, K, V, scores, ÷√d_k, softmax weights (table and heatmap) and output, in order."""
    st.markdown(f"#### Step by step ({len(steps.tokens)} tokens, d_k = {steps.d_k})")
    for column, name in zip(st.columns(3), ("Q", "K", "V"), strict=True):
        with column:
            render_step(steps, name)
    left, right = st.columns(2)
    with left:
        render_step(steps, "scores")
    with right:
        render_step(steps, "scaled")
        st.caption(f"√d_k = √{steps.d_k} = {steps.d_k**0.5:.4f}")
    left, right = st.columns(2)
    with left:
        render_softmax(steps)
    weights = matrix_heatmap(
        step_table(steps, "weights"), title="Softmax weights", value_format=".4f"
    )
    show_chart(weights, stem="softmax-weights", key="attention.figure.weights", container=right)
    render_output(steps)


def render_weight_changes(before: AttentionSteps, after: AttentionSteps) -> None:
    """Every weight without and with the appended token, as a table and a chart."""
    st.markdown(f"#### How every weight changed when “{AGAIN_TOKEN}” joined")
    st.caption(
        "Each old row's softmax now has one more term in its denominator, so every old weight "
        "shrinks: the new token takes its share from every other token's contribution."
    )
    changes = weight_changes(before, after)
    text = pd.DataFrame(
        {
            "query": changes["query"].map(md_escape),
            "key": changes["key"].map(md_escape),
            "before": changes["before"].map(lambda v: "new" if pd.isna(v) else f"{v:.4f}"),
            "after": changes["after"].map(lambda v: f"{v:.4f}"),
            "change": changes["change"].map(lambda v: "" if pd.isna(v) else f"{v:+.4f}"),
        }
    )
    left, right = st.columns(2)
    left.table(text, hide_index=True)
    show_chart(weight_change_chart(changes), stem="weight-changes", key="attention.figure.changes",
               container=right, width="stretch")  # fmt: skip


def render_worked_example() -> AttentionSteps | None:
    """The editable example and its steps; None (with an error shown) when an edit is invalid."""
    st.markdown(
        "The textbook's example: three tokens with two-dimensional vectors. Edit any number "
        "(add or delete tokens in X with the table's own controls) and every step below follows."
    )
    base = textbook_example()
    left, right = st.columns(2)
    with left:
        x_table = render_x_editor(base)
    with right:
        st.markdown("**Try it**")
        again = st.toggle(
            f"Append “{AGAIN_TOKEN}” (x = [{AGAIN_X[0]:g}, {AGAIN_X[1]:g}])",
            key="attention.again",
        )
        st.button("Reset to the textbook", key="attention.reset", on_click=guarded(reset_editors))
    projections = render_projection_editors(base)
    try:
        before = compute_steps(x_table, projections)
        steps = append_token(before, AGAIN_TOKEN, AGAIN_X) if again else before
    except UserError as exc:
        st.error(f"Cannot compute attention: {md_escape(exc)}")
        return None
    render_steps(steps)
    if again:
        render_weight_changes(before, steps)
    return steps


# --------------------------------------------------------------------------- two heads


def render_head_editors() -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    second = self_attention(textbook_example().X, SECOND_HEAD_W_Q, SECOND_HEAD_W_K, SECOND_HEAD_W_V)
    with st.expander("Edit head 2 and the output projection W_O"):
        head2 = render_projection_editors(second, key_prefix="attention.head2.", note=" (head 2)")
        w_o = labelled(AVERAGE_HEADS_W_O, ["h1 z1", "h1 z2", "h2 z1", "h2 z2"], ["o1", "o2"])
        column = st.columns(3)[0]
        column.markdown("**W_O**: one row per concatenated output")
        w_o = column.data_editor(w_o, key="attention.W_O", column_config=small_columns(w_o))
    return head2, w_o


def render_heads(result: MultiHeadSteps) -> None:
    for number, (column, head) in enumerate(zip(st.columns(2), result.heads, strict=True), 1):
        with column:
            show_chart(
                matrix_heatmap(
                    step_table(head, "weights"), title=f"Head {number} weights", value_format=".4f"
                ),
                stem=f"head-{number}-weights", key=f"attention.figure.head{number}",
            )  # fmt: skip
            st.caption(f"Head {number} output")
            render_matrix(step_table(head, "output"))
    rows = [md_escape(label) for label in step_table(result.heads[0], "output").index]
    widths = [f"h{h + 1} z{j + 1}" for h, head in enumerate(result.heads) for j in range(2)]
    left, right = st.columns(2)
    with left:
        st.caption("Concatenated head outputs")
        render_matrix(labelled(result.concat, rows, widths[: result.concat.shape[1]]))
    with right:
        st.caption("Output = concatenation · W_O")
        outputs = [f"o{j + 1}" for j in range(result.output.shape[1])]
        render_matrix(labelled(result.output, rows, outputs))


def render_two_heads(steps: AttentionSteps | None) -> None:
    st.markdown(
        "Two heads look at the same tokens through their own W_Q, W_K, W_V. Head 1 uses the "
        "matrices of the worked example; head 2's queries read only the first feature, so it "
        "matches tokens differently. Their outputs are concatenated and projected by W_O "
        "(by default: the average of the two heads)."
    )
    head2, w_o = render_head_editors()
    if steps is None:
        st.info("Fix the worked example's matrices first; both heads read its tokens.")
        return
    try:
        result = multi_head_attention(
            steps.X,
            [steps.W_Q, head2["W_Q"]],
            [steps.W_K, head2["W_K"]],
            [steps.W_V, head2["W_V"]],
            w_o,
            tokens=steps.tokens,
        )
    except UserError as exc:
        st.error(f"Cannot compute the two heads: {md_escape(exc)}")
        return
    render_heads(result)


# --------------------------------------------------------------------------- positional encoding


@st.cache_data(show_spinner="Running the tiny transformer…", max_entries=16)
def cached_word_order_demo(texts: tuple[str, ...]) -> WordOrderDemo:
    return word_order_demo(texts)


def render_pe_matrix() -> None:
    left, right = st.columns(2)
    n = left.slider("Positions n", 1, 200, 50, key="attention.pe_n")
    d = right.slider("Dimensions d", 1, 128, 64, key="attention.pe_d")
    pe = positional_encoding(n, d)
    st.latex(
        r"PE_{(pos,\,2i)} = \sin\!\left(\frac{pos}{10000^{2i/d}}\right) \qquad "
        r"PE_{(pos,\,2i+1)} = \cos\!\left(\frac{pos}{10000^{2i/d}}\right)"
    )
    chart = positional_encoding_heatmap(pe, title=f"PE for n = {n}, d = {d}")
    show_chart(chart.properties(height=360), stem="positional-encoding",
               key="attention.figure.pe", width="stretch")  # fmt: skip
    st.caption(
        "Each row is the vector added to the word at that position. The first dimensions cycle "
        "fast, the last ones slowly, so every position gets its own pattern. The first rows and "
        "columns, to check by hand (PE(1, 0) = sin 1, PE(1, 1) = cos 1):"
    )
    corner = pe[:4, :6]
    render_matrix(
        labelled(
            corner,
            [f"pos {p}" for p in range(corner.shape[0])],
            [f"dim {i}" for i in range(corner.shape[1])],
        ),
        decimals=4,
    )


def render_demo_side(demo: WordOrderDemo, *, on: bool) -> None:
    probs, pooled = (demo.probs_on, demo.pooled_on) if on else (demo.probs_off, demo.pooled_off)
    rows = [f"text {i + 1}" for i in range(len(demo.texts))]
    st.markdown(f"**Positional encoding {'on' if on else 'off'}**")
    st.caption("Class probabilities of the untrained model")
    render_matrix(labelled(probs, rows, ["class A", "class B"]), decimals=4)
    shown = min(POOLED_DIMS_SHOWN, pooled.shape[1])
    st.caption(f"Pooled vector, first {shown} of {pooled.shape[1]} dimensions")
    render_matrix(labelled(pooled[:, :shown], rows, [f"dim {i}" for i in range(shown)]), decimals=4)


def render_demo_verdicts(demo: WordOrderDemo) -> None:
    pooled_off, probs_off = scientific(demo.spread_off), scientific(demo.prob_spread_off)
    if demo.identical_off:
        st.info(
            "Positional encoding off: identical outputs. The largest absolute difference between "
            f"the pooled vectors is {pooled_off} and between the probabilities {probs_off} "
            "(float rounding): the model sees only the bag of words."
        )
    elif not demo.same_bag_of_words:
        st.info(
            f"Positional encoding off: the outputs differ (by up to {pooled_off}) because the two "
            "texts have different bags of words. Reorder the same words to see them coincide."
        )
    pooled_on, probs_on = f"{demo.spread_on:.4f}", f"{demo.prob_spread_on:.4f}"
    if demo.identical_on:
        st.info("Positional encoding on: identical outputs, because the texts are the same.")
    else:
        st.success(
            "Positional encoding on: different outputs. The largest absolute difference between "
            f"the pooled vectors is {pooled_on} and between the probabilities {probs_on}: "
            "word order now reaches the model."
        )


def render_word_order_demo() -> None:
    st.markdown("#### Without positional encoding, word order is invisible")
    st.caption(
        "A tiny transformer (one layer, d = 64, mean pooling), untrained and seeded, runs the "
        "same weights twice: once with the positional encoding added to the word vectors and "
        "once without. Self-attention treats its inputs as a set, so without positions the two "
        "orders give the same result."
    )
    left, right = st.columns(2)
    first = left.text_input("Text 1", DEMO_TEXTS[0], key="attention.order_text1", max_chars=500)
    second = right.text_input("Text 2", DEMO_TEXTS[1], key="attention.order_text2", max_chars=500)
    try:
        demo = cached_word_order_demo((first, second))
    except UserError as exc:  # an empty text
        st.error(md_escape(exc))
        return
    render_demo_verdicts(demo)
    left, right = st.columns(2)
    with left:
        render_demo_side(demo, on=False)
    with right:
        render_demo_side(demo, on=True)
    render_train_link()


def render_train_link() -> None:
    """Point to the Train page, where the tiny transformer is trained with and without PE."""
    label = "Train the tiny transformer with and without positional encoding on the Train page"
    st.page_link("pages/train.py", label=label, icon=":material/model_training:")


# --------------------------------------------------------------------------- cost


@st.cache_data(show_spinner=False, max_entries=8)
def cached_timing(config: TimingConfig) -> TimingResult:
    """On the short lane (it takes the CPUs for seconds), cancelled past the lane's limit."""
    return run_short(
        lambda cancel: measure_attention_vs_lstm(config, cancel=cancel),
        title="Time attention against an LSTM", kind="lab",
    )  # fmt: skip


def render_operation_counts() -> None:
    left, right = st.columns(2)
    n = int(left.number_input("Sequence length n", 1, 1_000_000, 500, key="attention.cost_n"))
    d = int(right.number_input("Model width d", 1, 100_000, 768, key="attention.cost_d"))
    attention, recurrent = attention_ops(n, d), recurrent_ops(n, d)
    metrics = st.columns(3)
    metrics[0].metric("Self-attention: n²·d operations", scientific(attention))
    metrics[1].metric("Recurrent layer: n·d² operations", scientific(recurrent))
    metrics[2].metric("Sequential steps", f"1 vs {n:,}", help="attention vs recurrent layer")
    cheaper = "self-attention" if attention < recurrent else "the recurrent layer"
    st.markdown(
        f"With n = {n:,} and d = {d:,}, {cheaper} needs fewer operations. Attention does all of "
        f"its work in one parallel step; the recurrent layer needs {n:,} steps one after the "
        "other, because each hidden state waits for the previous one. The counts cross at n = d."
    )
    ns = sorted({*(2**k for k in range(3, 15)), n})
    chart = cost_chart(cost_table(ns, d=d), title=f"Operations per layer, d = {d:,}")
    show_chart(chart, stem="operations-per-layer", key="attention.figure.cost")


def render_timing_form() -> TimingConfig | None:
    with st.form("attention.timing_form"):
        columns = st.columns(3)
        max_n = columns[0].select_slider(
            "Longest n", TIMING_MAX_NS, value=512, key="attention.timing_max_n"
        )
        d = columns[1].select_slider("Width d", TIMING_WIDTHS, value=256, key="attention.timing_d")
        repeats = columns[2].slider("Timed runs per point", 1, 5, 3, key="attention.repeats")
        submitted = st.form_submit_button("Measure on this machine", type="primary")
    if not submitted:
        return None
    return TimingConfig(max_n=max_n, d=d, heads=TIMING_HEADS, repeats=repeats)


def render_timing(result: TimingResult) -> None:
    config = result.config
    show_chart(timing_chart(result.table), stem="attention-vs-lstm-timing",
               key="attention.figure.timing", width="stretch")  # fmt: skip
    st.caption(
        f"Measured at {result.measured_at} on this machine's CPU by PyTorch with "
        f"{result.threads} thread(s): one torch.nn.MultiheadAttention(d = {config.d}, "
        f"{config.heads} heads, projections included) against one torch.nn.LSTM(d, d), on one "
        f"sequence of n random vectors; each point is the median of {config.repeats} timed "
        f"run(s) after one warm-up. The run took {result.total_seconds:.1f} s. Other work on the "
        "machine adds noise; the same settings show the same (cached) measurement."
    )
    milliseconds = result.table.pivot(index="n", columns="layer", values="seconds") * 1000
    milliseconds["LSTM ÷ attention"] = milliseconds["LSTM"] / milliseconds["self-attention"]
    milliseconds.index = [f"n = {n}" for n in milliseconds.index]
    milliseconds = milliseconds.rename(
        columns={"LSTM": "LSTM (ms)", "self-attention": "self-attention (ms)"}
    )
    render_matrix(milliseconds, decimals=3)


def render_cost() -> None:
    st.markdown(
        "Self-attention compares every token with every other: n²·d operations, all at once. "
        "A recurrent layer does a d×d product per token: n·d² operations in n sequential steps. "
        "The textbook's figures: n = 500, d = 768."
    )
    render_operation_counts()
    st.markdown("#### Measured: one attention layer against one LSTM layer")
    config = render_timing_form()
    if config is not None:
        steps = len(config.ns) * 2 * (config.repeats + 1)
        try:
            with st.spinner(f"Timing {steps} forward passes…"):
                st.session_state[TIMING] = cached_timing(config)
        except UserError as exc:  # a full short lane, or past its time limit
            st.error(md_escape(exc))
    result: TimingResult | None = st.session_state.get(TIMING)
    if result is not None:
        render_timing(result)


# --------------------------------------------------------------------------- page

st.title("Attention lab")
st.write(
    "How self-attention weighs tokens against each other, why a transformer needs positional "
    "encoding to see word order, and what attention costs. Every number can be checked by hand."
)
current_actor()  # the frame's check again: a page reached without app.py stops here too
if presenter_on("attention"):  # the same sections, told in order one below the other
    worked_tab, heads_tab, position_tab, cost_tab, lstm_tab = presenter_sections(PRESENTER_TITLES)
else:
    worked_tab, heads_tab, position_tab, cost_tab, lstm_tab = st.tabs(
        ["Worked example", "Two heads", "Positional encoding", "Cost", "LSTM beside attention"]
    )
with worked_tab:
    worked_steps = render_worked_example()
with heads_tab:
    render_two_heads(worked_steps)
with position_tab:
    render_pe_matrix()
    render_word_order_demo()
with cost_tab:
    render_cost()
with lstm_tab:
    render_trained_order_models()  # the LSTM beside attention, trained (a job on the queue)
