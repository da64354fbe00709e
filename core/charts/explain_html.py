"""An explanation as escaped HTML: the word-level side-by-side highlight (a fragment for the page)
and a self-contained document to download. Every string that comes from a complaint or a label
passes through `html.escape` before it becomes markup."""

from __future__ import annotations

import html
from collections.abc import Sequence

from core.analysis.explain import Explanation
from core.charts.word_strip import NEGATIVE, POSITIVE, WordRow, row_scale


def _colour(score: float, scale: float) -> str:
    """Background for a score: blue for positive, red for negative, opacity ∝ |score| / scale."""
    rgb = POSITIVE if score >= 0 else NEGATIVE
    alpha = min(abs(score) / scale, 1.0) if scale > 0 else 0.0
    return f"rgba({rgb[0]},{rgb[1]},{rgb[2]},{alpha:.2f})"


def _cell(word: str, score: float, scale: float, tip: str, *, seen: bool = True) -> str:
    """One coloured word; `word` and `tip` are escaped here."""
    style = "padding:1px 4px;border-radius:3px;display:block;white-space:pre;"
    if seen:
        style += f"background:{_colour(score, scale)};"
    else:
        style += "color:#888;border:1px dashed #bbb;"
    return (
        f'<span style="{style}" title="{html.escape(tip, quote=True)}">{html.escape(word)}</span>'
    )


def _word_block(
    expl: Explanation,
    index: int,
    scales: tuple[float, ...],
    extra: WordRow | None = None,
    top_name: str = "transformer",
) -> str:
    word = expl.words[index].text
    t_score, b_score = expl.neural_scores[index], expl.bow_scores[index]
    seen = expl.neural_seen[index]
    t_tip = f"{word} · {top_name} {t_score:+.4f}" if seen else f"{word} · cut off by truncation"
    b_tip = f"{word} · bag of words {b_score:+.4f}"
    cells = _cell(word, t_score, scales[0], t_tip, seen=seen)
    cells += _cell(word, b_score, scales[1], b_tip)
    if extra is not None:
        e_score, e_seen = extra.scores[index], extra.is_seen(index)
        e_tip = f"{word} · {extra.name} {e_score:+.4f}" if e_seen else f"{word} · cut off"
        cells += _cell(word, e_score, scales[2], e_tip, seen=e_seen)
    return f'<span style="display:inline-flex;flex-direction:column;gap:2px;">{cells}</span>'


def _legend(names: Sequence[str]) -> str:
    """The rows' names, left of the words; each escaped."""
    cells = "".join(
        f'<span style="padding:1px 4px;display:block;">{html.escape(name)}</span>' for name in names
    )
    column = "display:inline-flex;flex-direction:column;gap:2px;color:#555;"
    return f'<span style="{column}">{cells}</span>'


def escaped_highlight_html(
    expl: Explanation, *, extra: WordRow | None = None, top_name: str = "Transformer"
) -> str:
    """The side-by-side highlight: for each word, the transformer's attribution above and the
    bag-of-words contribution below (and `extra`'s scores under them, e.g. the LSTM beside),
    blue towards the target desk and red away from it, values on hover. Each row is scaled to
    its own largest |score|. `top_name` labels the first row (an active LSTM model's scores sit
    there). Every word and label is escaped."""
    scales = (row_scale(expl.neural_scores), row_scale(expl.bow_scores))
    names = [top_name, "Bag of words"]
    if extra is not None:
        extra.check(expl)
        scales += (row_scale(extra.scores),)
        names.append(extra.name)
    legend = _legend(names)
    tip_name = top_name.lower() if top_name == "Transformer" else top_name
    blocks = "".join(_word_block(expl, i, scales, extra, tip_name) for i in range(len(expl.words)))
    target = html.escape(expl.target)
    return (
        '<div style="font-family:sans-serif;line-height:1.4;">'
        f'<div style="margin-bottom:6px;color:#555;">Scores for the desk <b>{target}</b> '
        "(blue: towards it, red: away from it; hover for values)</div>"
        f'<div style="display:flex;flex-wrap:wrap;gap:6px 4px;">{legend}{blocks}</div></div>'
    )


def _probability_rows(expl: Explanation) -> str:
    rows = []
    for desk in expl.neural.probabilities:
        rows.append(
            f"<tr><td>{html.escape(desk)}</td>"
            f"<td>{expl.neural.probabilities[desk]:.3f}</td>"
            f"<td>{expl.bow.probabilities[desk]:.3f}</td></tr>"
        )
    return "".join(rows)


def _word_rows(expl: Explanation, extra: WordRow | None = None) -> str:
    more = [""] * len(expl.words) if extra is None else [f"<td>{s:+.4f}</td>" for s in extra.scores]
    return "".join(
        f"<tr><td>{i + 1}</td><td>{html.escape(w.text)}</td><td>{t:+.4f}</td><td>{b:+.4f}</td>"
        f"{e}</tr>"
        for i, (w, t, b, e) in enumerate(
            zip(expl.words, expl.neural_scores, expl.bow_scores, more, strict=True)
        )
    )


def _extra_label(extra: WordRow | None) -> str:
    if extra is None or extra.label is None:
        return ""
    return f" ·\n{html.escape(extra.name)}: <b>{html.escape(extra.label)}</b>"


def _method_note(expl: Explanation, method: str | None) -> str:
    """What the first row's scores are, with their gap and delta (escaped `method`)."""
    relative = "n/a" if expl.relative_delta is None else f"{expl.relative_delta:.1%}"
    how = (
        f"Integrated Gradients with {expl.tokens.n_steps} steps"
        if method is None
        else html.escape(method)
    )
    return (
        f"{how}: logit gap {expl.logit_gap:+.4f}, convergence delta {expl.delta:+.4f} "
        f"({relative} of the gap)."
    )


def escaped_explanation_document(
    expl: Explanation,
    *,
    extra: WordRow | None = None,
    top_name: str = "Transformer",
    method: str | None = None,
) -> str:
    """A self-contained HTML page of the explanation to download: no scripts, no external
    resources (a Content-Security-Policy forbids them), every user-derived string escaped.
    `extra` and `top_name` as in `escaped_highlight_html`; `method` names how the first row's
    scores were computed (None: Integrated Gradients)."""
    top = html.escape(top_name)
    extra_th = "" if extra is None else f"<th>{html.escape(extra.name)}</th>"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Grievance Lens explanation</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:8px}}</style></head><body>
<h1>Why the models routed this complaint</h1>
<pre>{html.escape(expl.text)}</pre>
<p>{top}: <b>{html.escape(expl.neural.label)}</b> ·
Bag of words: <b>{html.escape(expl.bow.label)}</b>{_extra_label(extra)} ·
Explained desk: <b>{html.escape(expl.target)}</b></p>
<table><tr><th>desk</th><th>{top.lower()}</th><th>bag of words</th></tr>
{_probability_rows(expl)}</table>
<h2>Word by word</h2>
{escaped_highlight_html(expl, extra=extra, top_name=top_name)}
<p>{_method_note(expl, method)} Punctuation and symbols outside
words carry {expl.unassigned:+.4f}.</p>
<table><tr><th>#</th><th>word</th><th>{top.lower()}</th><th>bag of words</th>{extra_th}</tr>
{_word_rows(expl, extra)}</table>
</body></html>
"""
