"""The LSTM's word contributions for one complaint: gradient × input on its word embeddings,
summed per word of core.text, for the LSTM shown beside the bag of words (Classify, Explain) and
for an active model that is itself an LSTM (Explain page, `python -m core explain`).

Decision: gradient × input, not Integrated Gradients. The LSTM is a third model, shown for
contrast; one forward and one backward pass (fp32, no dropout) cost what one prediction costs,
where the transformer's adaptive integration takes dozens. The attributed quantity is the
target's centred logit (logit minus the mean logit), as for the transformer's row, so the rows
of the word grid speak in the same log-odds against the average desk. The [PAD] row of the
embedding table is zero (padding_idx), so gradient × input is Integrated Gradients with one node
at the text's end of the path from the [PAD] baseline; its `delta` (sum of the scores minus the
logit gap F(text) - F(PAD)) says how far that first-order reading is from the whole change.

Decision: the gradient is taken on a private training-mode view of the model with every dropout
at zero (the same function as eval mode): cuDNN computes an LSTM's backward pass only in
training mode, and a view (core.models.transformer.inference.inference_view) never switches the
shared model another session may be running. torch.autograd.grad writes no `.grad` into the
shared weights.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from core.analysis.explain import (
    AttentionMaps,
    ExplainConfig,
    Explanation,
    TokenAttribution,
    explain_text,
    merge_to_words,
)
from core.checks import check_complaint
from core.data.privacy import mask_personal_data
from core.errors import UserError
from core.models.classifier import Prediction, shared_classes
from core.models.lstm.model import LstmForSequenceClassification
from core.models.transformer.inference import inference_view
from core.progress import check_cancel
from core.text import word_spans

METHOD = "gradient x input"  # how the LSTM's row is computed, as pages and JSON name it
IG_METHOD = "integrated gradients"  # how core.analysis.explain attributes a transformer


@dataclass(frozen=True)
class LstmWordScores:
    """The LSTM's answer for one complaint and its gradient × input per word, for `target`.

    `scores[i]` belongs to `words[i]` (the words of core.text.word_spans of the masked text);
    words cut off by the length limit have `seen[i] = False` and a score of 0. The scores and
    `unassigned` add up to `total`, the sum of the per-token scores.
    """

    label: str  # the LSTM's desk
    probabilities: dict[str, float]  # every desk's probability (the classifier's own answer)
    words: tuple[str, ...]
    scores: tuple[float, ...]
    target: str  # the desk the scores are for
    seen: tuple[bool, ...]
    tokens: tuple[str, ...]  # the tokens the LSTM read ([UNK] for unknown words)
    offsets: tuple[tuple[int, int], ...]  # character span of each token in `text`; (0, 0) special
    token_scores: tuple[float, ...]  # (seq,) gradient × input per token
    unassigned: float  # scores of tokens inside no word (none for the word tokenizer)
    logit_gap: float  # centred target logit of the text minus that of the [PAD] baseline
    text: str  # the complaint as the LSTM read it: personal data masked

    @property
    def total(self) -> float:
        """Sum of the per-token scores: what the word scores and `unassigned` add up to."""
        return float(sum(self.token_scores))

    @property
    def delta(self) -> float:
        """total - logit_gap: how far the first-order reading is from the whole change."""
        return self.total - self.logit_gap

    @property
    def prediction(self) -> Prediction:
        return Prediction(self.label, dict(self.probabilities))

    def to_json(self) -> dict[str, Any]:
        return {
            "method": METHOD,
            "label": self.label,
            "probabilities": dict(self.probabilities),
            "target": self.target,
            "words": list(self.words),
            "scores": list(self.scores),
            "seen": list(self.seen),
            "total": self.total,
            "logit_gap": self.logit_gap,
            "delta": self.delta,
        }


@dataclass(frozen=True)
class _Read:
    """One text as the LSTM reads it: ids (1, seq), tokens and their character offsets."""

    input_ids: torch.Tensor
    tokens: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]


def is_lstm_classifier(classifier: Any) -> bool:
    """Whether a loaded classifier (core.models.transformer.inference.NeuralClassifier)
    runs an LSTM: it then has no attention maps and is explained by gradient × input."""
    return isinstance(getattr(classifier, "model", None), LstmForSequenceClassification)


def explanation_method(classifier: Any) -> str:
    """How `explain_any` attributes this classifier's words: METHOD or IG_METHOD."""
    return METHOD if is_lstm_classifier(classifier) else IG_METHOD


def _read(tokenizer: Any, text: str, max_length: int) -> _Read:
    ids = tokenizer.encode(text, truncation=True, max_length=max_length)
    offsets = tokenizer.word_offsets(text, truncation=True, max_length=max_length)
    return _Read(
        input_ids=torch.tensor([ids], dtype=torch.long),
        tokens=tuple(tokenizer.convert_ids_to_tokens(ids)),
        offsets=tuple((int(s), int(e)) for s, e in offsets),
    )


def _gradient_view(model: nn.Module) -> nn.Module:
    """A private view of `model` in training mode with every dropout at zero (see the module
    docstring: cuDNN's LSTM backward needs training mode; zero dropout makes it eval's twin)."""
    view = inference_view(model).train()
    for module in view.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
        elif isinstance(module, nn.RNNBase):
            module.dropout = 0.0
    return view


@dataclass(frozen=True)
class TokenGradients:
    """Gradient × input of one text for one desk, before the merge into words."""

    scores: np.ndarray  # (seq,) float64
    logits: np.ndarray  # (n_classes,) the text's fp32 logits
    target_index: int
    logit_gap: float  # centred target logit of the text minus that of zero embeddings ([PAD])


def gradient_x_input(
    model: nn.Module, input_ids: torch.Tensor, target_index: int | None = None
) -> TokenGradients:
    """Gradient × input of the target's centred logit on the word embeddings.

    input_ids (1, seq) → per-token scores (seq,): the gradient times the embedding, summed over
    the embedding's d_model dimensions. `target_index` None: the desk of the highest logit.
    fp32, one forward and one backward pass (and one forward pass for the baseline).
    """
    view = _gradient_view(model)
    ids = input_ids.to(model.embeddings.weight.device)
    mask = torch.ones_like(ids)
    with torch.enable_grad():
        embeds = view.embeddings(ids).detach().float().requires_grad_(True)  # (1, seq, d)
        logits = view(inputs_embeds=embeds, attention_mask=mask).logits.float()[0]  # (k,)
        index = int(logits.argmax()) if target_index is None else target_index
        centred = logits[index] - logits.mean()
        (grad,) = torch.autograd.grad(centred, embeds)
    with torch.no_grad():
        base = view(inputs_embeds=torch.zeros_like(embeds), attention_mask=mask).logits.float()[0]
    scores = (grad * embeds.detach()).sum(dim=-1)[0]  # (seq,)
    return TokenGradients(
        scores=scores.double().cpu().numpy(), logits=logits.detach().double().cpu().numpy(),
        target_index=index,
        logit_gap=float(centred.detach()) - float(base[index] - base.mean()),
    )  # fmt: skip


def _classes(model: nn.Module) -> list[str]:
    id2label = model.config.id2label
    return [str(id2label[i]) for i in range(model.config.num_labels)]


def _target_index(
    classes: list[str], target: str | None, pred_probs: np.ndarray | None
) -> int | None:
    """The index of `target`, else of the reported answer's desk; None: the logits decide."""
    if target is None:
        return None if pred_probs is None else int(np.argmax(pred_probs))
    if target not in classes:
        raise UserError(f"the LSTM has no desk {target!r}; it routes to {classes}")
    return classes.index(target)


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def explain_lstm(
    model: nn.Module,
    tokenizer: Any,
    text: str,
    *,
    target: str | None = None,
    words: Sequence[str] | None = None,
    pred_probs: np.ndarray | None = None,
    max_length: int | None = None,
) -> LstmWordScores:
    """The LSTM's gradient × input per word of one complaint, for `target` (default: its desk).

    Parameters
    ----------
    model : core.models.lstm.model.LstmForSequenceClassification
        `.embeddings`, `.config.id2label`, forward with `inputs_embeds`; never switched or
        changed (a private view computes the gradient).
    tokenizer : core.models.tiny.tokenizer.TinyTokenizer
        The word tokenizer it was trained with; it truncates at `max_length` tokens.
    text : str
        The complaint; it needs at least one word. Personal data is masked first, as every
        model reads it.
    target : str, optional
        The desk to explain; UserError when the LSTM has no such desk.
    words : sequence of str, optional
        The word list the scores must align with (e.g. an Explanation's words); ValueError
        when the text's words differ from it.
    pred_probs : ndarray (n_classes,), optional
        The classifier's own answer on its runtime (reported as `probabilities`); None: the
        softmax of this fp32 pass.
    max_length : int, optional
        Tokens read at most; None: the tokenizer's and the model's limit.
    """
    text = mask_personal_data(check_complaint(text, purpose="explain"))
    spans = word_spans(text)
    if words is not None and list(words) != [s.text for s in spans]:
        raise ValueError("`words` are not the words of the masked text; explain the same text")
    limit = min(max_length or tokenizer.max_length, model.config.max_length)
    read = _read(tokenizer, text, limit)
    classes = _classes(model)
    gradients = gradient_x_input(model, read.input_ids, _target_index(classes, target, pred_probs))
    probs = _softmax(gradients.logits) if pred_probs is None else np.asarray(pred_probs, float)
    word_scores, seen, unassigned = merge_to_words(text, read.offsets, gradients.scores)
    answer = Prediction.of(classes, probs)
    return LstmWordScores(
        label=answer.label, probabilities=answer.probabilities,
        words=tuple(s.text for s in spans), scores=tuple(float(s) for s in word_scores),
        target=classes[gradients.target_index], seen=tuple(bool(s) for s in seen),
        tokens=read.tokens, offsets=read.offsets,
        token_scores=tuple(float(s) for s in gradients.scores),
        unassigned=float(unassigned), logit_gap=gradients.logit_gap, text=text,
    )  # fmt: skip


def explain_lstm_classifier(
    classifier: Any,
    text: str,
    *,
    target: str | None = None,
    words: Sequence[str] | None = None,
) -> LstmWordScores:
    """`explain_lstm` for a loaded LSTM (NeuralClassifier over it), reporting the answer
    its `predict_proba` gives on its runtime, as Classify shows it."""
    text = check_complaint(text, purpose="explain")
    if not is_lstm_classifier(classifier):
        raise UserError("this model is not an LSTM; pick a model trained with --backbone lstm")
    pred_probs = classifier.predict_proba([text])[0]  # (n_classes,)
    return explain_lstm(
        classifier.model, classifier.tokenizer, text, target=target, words=words,
        pred_probs=pred_probs, max_length=classifier.max_length,
    )  # fmt: skip


def explain_lstm_text(
    neural: Any,
    bow: Any,
    text: str,
    config: ExplainConfig = ExplainConfig(),
    *,
    cancel: threading.Event | None = None,
) -> Explanation:
    """An active model that is an LSTM, explained as `explain_text` explains a transformer: its
    gradient × input in the transformer's row, the bag of words beside it, and no attention
    (0 layers, 0 heads, its tokens). `tokens.n_steps` is 1 and `delta` the first-order gap
    (module docstring); the integration settings of `config` do not apply, its target does."""
    check_cancel(cancel)
    classes = shared_classes(neural, bow)
    lstm = explain_lstm_classifier(neural, text, target=config.target)
    bow = bow.word_contributions(lstm.text, target=lstm.target)
    n = len(lstm.tokens)
    scores = np.asarray(lstm.token_scores, dtype=np.float64)
    return Explanation(
        text=lstm.text, words=tuple(word_spans(lstm.text)), neural_scores=lstm.scores,
        bow_scores=tuple(float(s) for s in bow.scores), neural_seen=lstm.seen,
        neural=lstm.prediction,
        bow=Prediction.of(classes, np.array([bow.probabilities[c] for c in classes])),
        target=lstm.target, unassigned=lstm.unassigned, bow_intercept=bow.intercept,
        tokens=TokenAttribution(lstm.tokens, scores, lstm.logit_gap, lstm.delta, 1),
        token_offsets=lstm.offsets,
        attention=AttentionMaps(lstm.tokens, np.zeros((0, 0, n, n), np.float32), has_cls=False),
    )  # fmt: skip


def explain_any(
    neural: Any,
    bow: Any,
    text: str,
    config: ExplainConfig = ExplainConfig(),
    *,
    cancel: threading.Event | None = None,
    decider: Any | None = None,
) -> Explanation:
    """`explain_text`, or `explain_lstm_text` when the model is an LSTM (it has no attention,
    and torch routes it: `decider` is for the transformer's serving graph)."""
    if is_lstm_classifier(neural):
        return explain_lstm_text(neural, bow, text, config, cancel=cancel)
    return explain_text(neural, bow, text, config, cancel=cancel, decider=decider)
