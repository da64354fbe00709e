"""The bag-of-words baseline: TF-IDF over the project's words + logistic regression or naive Bayes.

It sees each text as a multiset of words (plus, optionally, n-grams) after personal data is
masked (core.data.privacy), so two texts with the same masked bag of words get the same
prediction and no card or phone number becomes a feature. Saved as plain arrays (npz + json).
"""

from __future__ import annotations

import json
import warnings
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import sklearn
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import InconsistentVersionWarning, NotFittedError
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import MultinomialNB
from sklearn.pipeline import Pipeline

from core.checks import check_int, check_positive, check_texts
from core.data.privacy import MASKING_VERSION, mask_personal_data
from core.errors import UserError
from core.paths import read_json
from core.text import WordSpan, word_spans, words

NPZ_NAME = "baseline.npz"
JSON_NAME = "baseline.json"
FORMAT_NAME = "grievance-lens-baseline"
FORMAT_VERSION = 1
KINDS = ("logreg", "nb")


@dataclass(frozen=True)
class BaselineConfig:
    """How to build the bag-of-words baseline."""

    kind: Literal["logreg", "nb"] = "logreg"
    ngram_max: int = 1  # 1 = unigrams only; 2 = unigrams + bigrams (the only order it can see)
    # Inverse L2 strength for logreg. TF-IDF rows are L2-normalised, so each feature is small
    # (about 0.1) and the sklearn default C=1 shrinks coefficients of a few hundred complaints so
    # hard that probabilities stay timid (CFPB sample, 5 classes: mean top probability 0.47 at
    # C=1, 0.68 at C=10). 5-fold CV accuracy on the CFPB train split: C=1 0.756, 3 0.771,
    # 10 0.767, 30 0.759, 100 0.757, so 3 to 10 is a plateau; 10 keeps probabilities usable.
    C: float = 10.0
    # MultinomialNB smoothing. TF-IDF values are fractions, so alpha=1 swamps them; CFPB train
    # 5-fold CV: alpha 0.03 0.724, 0.1 0.730, 0.3 0.719, 1.0 0.679.
    alpha: float = 0.1
    min_df: int = 1
    sublinear_tf: bool = True  # 1 + log(tf): ten repeats of a word are not ten times the evidence
    seed: int = 0
    max_iter: int = 2000  # lbfgs on large C needs more than the default 100 steps

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UserError(f"kind must be one of {KINDS}, got {self.kind!r}")
        check_int("ngram_max", self.ngram_max, minimum=1)
        check_positive("C", self.C)
        check_positive("alpha", self.alpha)
        check_int("min_df", self.min_df, minimum=1)
        if not isinstance(self.sublinear_tf, bool):
            raise UserError(f"sublinear_tf must be True or False, got {self.sublinear_tf!r}")
        check_int("seed", self.seed, minimum=0)
        check_int("max_iter", self.max_iter, minimum=1)


DEFAULT_CONFIG = BaselineConfig()


@dataclass(frozen=True)
class WordContributions:
    """How much each word occurrence of a text pushes the model towards `target`.

    `scores[i]` belongs to `words[i]`. `sum(scores) + intercept` is the target's centred logit
    (logreg) or centred joint log-likelihood (nb): the value minus its mean over classes.
    """

    words: tuple[WordSpan, ...]
    scores: tuple[float, ...]
    target: str
    probabilities: dict[str, float]
    intercept: float


class BagOfWordsClassifier(ClassifierMixin, BaseEstimator):
    """TF-IDF over `core.text.words` n-grams, then LogisticRegression or MultinomialNB.

    Parameters
    ----------
    config : BaselineConfig
        Model kind, n-gram order and regularisation.

    Attributes
    ----------
    classes_ : np.ndarray of str, shape (n_classes,)
        Sorted class labels; the column order of `predict_proba`.
    pipeline_ : sklearn.pipeline.Pipeline
        Steps "tfidf" (TfidfVectorizer) and "clf" (LogisticRegression or MultinomialNB).
    """

    def __init__(self, config: BaselineConfig = DEFAULT_CONFIG) -> None:
        self.config = config

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> BagOfWordsClassifier:
        """Learn the vocabulary, IDF weights and classifier from `texts` and their `labels`."""
        _check_config(self.config)
        texts = check_texts(texts)
        labels = _check_labels(labels, n=len(texts))
        if not any(words(t) for t in texts):
            raise UserError("the training texts contain no words; give texts with some words")
        pipeline = Pipeline(
            [("tfidf", _make_vectorizer(self.config)), ("clf", _make_clf(self.config))]
        )
        pipeline.fit(texts, labels)
        self.pipeline_ = pipeline
        self.classes_ = np.asarray(pipeline.classes_, dtype=str)
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in `classes_` order."""
        self._check_fitted()
        texts = check_texts(texts, allow_empty=True)
        if not texts:
            return np.empty((0, len(self.classes_)), dtype=np.float64)
        return np.asarray(self.pipeline_.predict_proba(texts), dtype=np.float64)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable class of each text."""
        pred_probs = self.predict_proba(texts)
        return [str(self.classes_[i]) for i in pred_probs.argmax(axis=1)]

    def word_contributions(self, text: str, *, target: str | None = None) -> WordContributions:
        """Score every word occurrence of masked `text` for class `target` (default: the
        prediction); `words` are the spans of `mask_personal_data(text)`.

        A feature's centred contribution x_j * (w[c, j] - mean_k w[k, j]) is shared equally among
        its occurrences, and an n-gram's share equally among its n words; out-of-vocabulary words
        score 0. The scores therefore add up to the target's centred logit minus its intercept.
        """
        self._check_fitted()
        if not isinstance(text, str):
            raise UserError(f"text must be a string, got {type(text).__name__}")
        text = mask_personal_data(text)  # the words it scores are the words the model read
        pred_probs = self.predict_proba([text])[0]
        target_index = self._target_index(target, pred_probs)
        weights, intercepts = self._centred_weights()
        scores = self._word_scores(text, weights[target_index])
        return WordContributions(
            words=tuple(word_spans(text)),
            scores=tuple(float(s) for s in scores),
            target=str(self.classes_[target_index]),
            probabilities={
                str(c): float(p) for c, p in zip(self.classes_, pred_probs, strict=True)
            },
            intercept=float(intercepts[target_index]),
        )

    def save(self, directory: str | Path) -> None:
        """Write `baseline.npz` (arrays) and `baseline.json` (config, classes) into `directory`."""
        self._check_fitted()
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez(directory / NPZ_NAME, **self._arrays())
        meta = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "kind": self.config.kind,
            "config": asdict(self.config),
            "classes": [str(c) for c in self.classes_],
            "n_features": int(len(self.pipeline_["tfidf"].vocabulary_)),
            "text_masking": MASKING_VERSION,
            "sklearn_version": sklearn.__version__,
        }
        (directory / JSON_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> BagOfWordsClassifier:
        """Rebuild a fitted model from a folder written by `save` (no pickle involved)."""
        directory = Path(directory)
        meta = _read_meta(directory / JSON_NAME)
        _check_sklearn_version(meta)
        config = _config_from_meta(meta, directory / JSON_NAME)
        classes = np.asarray(meta["classes"], dtype=str)
        arrays = _read_arrays(directory / NPZ_NAME, kind=config.kind)
        _check_arrays(arrays, kind=config.kind, n_classes=len(classes), path=directory / NPZ_NAME)
        model = cls(config)
        model.pipeline_ = _rebuild_pipeline(config, classes, arrays)
        model.classes_ = classes
        return model

    def _check_fitted(self) -> None:
        if not hasattr(self, "pipeline_"):
            raise NotFittedError("this BagOfWordsClassifier is not fitted; call fit() or load()")

    def _target_index(self, target: str | None, pred_probs: np.ndarray) -> int:
        if target is None:
            return int(pred_probs.argmax())
        matches = np.flatnonzero(self.classes_ == target) if isinstance(target, str) else []
        if len(matches) == 0:
            raise UserError(f"unknown target {target!r}; use one of {list(self.classes_)}")
        return int(matches[0])

    def _centred_weights(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-class feature weights (n_classes, n_features) and intercepts (n_classes,), centred.

        Softmax ignores a constant added to every class's logit, so the raw weights are only
        defined up to a per-feature shift across classes (binary logreg even stores one row).
        Subtracting the mean over classes picks the one version that is the same for every such
        shift, so a score means "pushes this class above the average class". (L2-penalised
        multinomial logreg already has class-centred weights; binary logreg and NB do not.)
        """
        clf = self.pipeline_["clf"]
        if self.config.kind == "nb":
            weights, intercepts = clf.feature_log_prob_, clf.class_log_prior_
        elif len(self.classes_) == 2:  # logits (0, z): sklearn keeps only the row for class 1
            weights = np.vstack([np.zeros_like(clf.coef_), clf.coef_])
            intercepts = np.array([0.0, clf.intercept_[0]])
        else:
            weights, intercepts = clf.coef_, clf.intercept_
        return weights - weights.mean(axis=0), intercepts - intercepts.mean()

    def _word_scores(self, text: str, class_weights: np.ndarray) -> np.ndarray:
        """Share each n-gram feature's contribution among its occurrences and their words."""
        tokens = words(text)
        x = self.pipeline_["tfidf"].transform([text]).tocsr()
        contribution = dict(zip(x.indices, x.data * class_weights[x.indices], strict=True))
        occurrences = _ngram_occurrences(tokens, self.pipeline_["tfidf"].vocabulary_, self.config)
        counts = Counter(feature for feature, _, _ in occurrences)
        scores = np.zeros(len(tokens), dtype=np.float64)
        for feature, start, n in occurrences:
            scores[start : start + n] += contribution.get(feature, 0.0) / counts[feature] / n
        return scores

    def _arrays(self) -> dict[str, np.ndarray]:
        vectorizer, clf = self.pipeline_["tfidf"], self.pipeline_["clf"]
        terms = sorted(vectorizer.vocabulary_, key=vectorizer.vocabulary_.__getitem__)
        arrays = {
            "idf_": np.asarray(vectorizer.idf_, dtype=np.float64),
            "vocabulary_terms": np.asarray(terms, dtype=str),
            "vocabulary_indices": np.asarray([vectorizer.vocabulary_[t] for t in terms], np.int64),
        }
        for name in _model_array_names(self.config.kind):
            arrays[name] = np.asarray(getattr(clf, name), dtype=np.float64)
        return arrays


def fit_baseline(
    texts: Sequence[str], labels: Sequence[str], *, config: BaselineConfig = DEFAULT_CONFIG
) -> BagOfWordsClassifier:
    """Fit and return a `BagOfWordsClassifier` built from `config`."""
    return BagOfWordsClassifier(config).fit(texts, labels)


def _check_config(config: object) -> None:
    if not isinstance(config, BaselineConfig):
        raise TypeError(f"config must be a BaselineConfig, got {type(config).__name__}")


def _check_labels(labels: Sequence[str], *, n: int) -> np.ndarray:
    labels = list(labels)
    if len(labels) != n:
        raise UserError(f"got {n} texts but {len(labels)} labels; give one label per text")
    bad = next((i for i, y in enumerate(labels) if not isinstance(y, str)), None)
    if bad is not None:
        raise UserError(f"labels[{bad}] is {labels[bad]!r}, not str; convert labels to strings")
    if len(set(labels)) < 2:
        raise UserError(f"need at least 2 distinct labels to train, got {sorted(set(labels))}")
    return np.asarray(labels, dtype=str)


def masked_words(text: str) -> list[str]:
    """The words the baseline reads: `words` of the text with personal data masked."""
    return words(mask_personal_data(text))


def _make_vectorizer(config: BaselineConfig) -> TfidfVectorizer:
    # words() is the project's one definition of a word (it lower-cases); n-grams are built by
    # sklearn from that token list, joined with a space. Masking inside the tokenizer covers
    # fit, predict and every loaded model alike, so no number ever enters the vocabulary.
    return TfidfVectorizer(
        tokenizer=masked_words,
        token_pattern=None,
        lowercase=False,
        ngram_range=(1, config.ngram_max),
        min_df=config.min_df,
        sublinear_tf=config.sublinear_tf,
    )


def _make_clf(config: BaselineConfig) -> LogisticRegression | MultinomialNB:
    if config.kind == "nb":
        return MultinomialNB(alpha=config.alpha)
    return LogisticRegression(C=config.C, max_iter=config.max_iter, random_state=config.seed)


def _ngram_occurrences(
    tokens: list[str], vocabulary: dict[str, int], config: BaselineConfig
) -> list[tuple[int, int, int]]:
    """(feature index, first token position, n) for every in-vocabulary n-gram of `tokens`."""
    found = []
    for n in range(1, config.ngram_max + 1):
        for start in range(len(tokens) - n + 1):
            feature = vocabulary.get(" ".join(tokens[start : start + n]))
            if feature is not None:
                found.append((feature, start, n))
    return found


def _model_array_names(kind: str) -> tuple[str, str]:
    return ("feature_log_prob_", "class_log_prior_") if kind == "nb" else ("coef_", "intercept_")


def _read_meta(path: Path) -> dict:
    missing = f"{path} is missing; save the model with BagOfWordsClassifier.save()"
    meta = read_json(path, missing=missing)
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise UserError(f"{path} is not a {FORMAT_NAME} file; save the model again")
    if meta.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"{path} has format_version {meta.get('format_version')!r}; this code reads "
            f"{FORMAT_VERSION}, so retrain or save the model again"
        )
    return meta


def _check_sklearn_version(meta: dict) -> None:
    """Warn, as scikit-learn does for its own files, when the model was saved by another
    major.minor release: the arrays load, but the estimators they are put into may differ."""
    saved = str(meta.get("sklearn_version", "unknown"))
    if saved.split(".")[:2] != sklearn.__version__.split(".")[:2]:
        warnings.warn(
            InconsistentVersionWarning(
                estimator_name=FORMAT_NAME,
                current_sklearn_version=sklearn.__version__,
                original_sklearn_version=saved,
            ),
            stacklevel=3,
        )


def _config_from_meta(meta: dict, path: Path) -> BaselineConfig:
    try:
        config = BaselineConfig(**meta["config"])
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{path} holds no valid config ({err}); save the model again") from err
    classes = meta.get("classes")
    ok = isinstance(classes, list) and all(isinstance(c, str) for c in classes)
    if not ok or len(classes) < 2 or classes != sorted(set(classes)):
        raise UserError(f"{path}: 'classes' must be >= 2 sorted distinct strings, got {classes!r}")
    if meta.get("kind") != config.kind:
        raise UserError(f"{path}: kind {meta.get('kind')!r} disagrees with config {config.kind!r}")
    return config


def _read_arrays(path: Path, *, kind: str) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise UserError(f"{path} is missing; save the model with BagOfWordsClassifier.save()")
    names = ("idf_", "vocabulary_terms", "vocabulary_indices", *_model_array_names(kind))
    try:
        # Our own handle: np.load leaks the file it opened when the archive is truncated.
        with path.open("rb") as handle:
            loaded = np.load(handle, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                raise UserError("it holds a single array, not an archive of named arrays")
            with loaded as npz:
                return {name: npz[name] for name in names}
    except KeyError as err:
        raise UserError(f"{path} lacks array {err}; save the model again") from err
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise UserError(f"{path} is not a readable npz archive ({err}); save again") from err


def _check_arrays(arrays: dict[str, np.ndarray], *, kind: str, n_classes: int, path: Path) -> None:
    problem = _array_problem(arrays, kind=kind, n_classes=n_classes)
    if problem:
        raise UserError(f"{path} is inconsistent: {problem}; save the model again")


def _array_problem(arrays: dict[str, np.ndarray], *, kind: str, n_classes: int) -> str | None:
    """The first thing wrong with the saved arrays, or None."""
    terms, indices = arrays["vocabulary_terms"], arrays["vocabulary_indices"]
    if terms.ndim != 1 or terms.dtype.kind != "U" or terms.size == 0:
        return "vocabulary_terms must be a non-empty 1-d array of strings"
    n = terms.size
    if len(set(terms.tolist())) != n:
        return "vocabulary_terms has duplicates"
    if indices.dtype.kind not in "iu" or indices.shape != (n,):
        return f"vocabulary_indices must be {n} integers"
    if not np.array_equal(np.sort(indices), np.arange(n)):
        return f"vocabulary_indices must be a permutation of 0..{n - 1}"
    rows = n_classes if kind == "nb" or n_classes > 2 else 1
    weight_name, intercept_name = _model_array_names(kind)
    expected = {"idf_": (n,), weight_name: (rows, n), intercept_name: (rows,)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            return f"{name} has shape {arrays[name].shape}, expected {shape}"
        if arrays[name].dtype.kind != "f" or not np.isfinite(arrays[name]).all():
            return f"{name} must hold finite floats"
    return None


def _rebuild_pipeline(
    config: BaselineConfig, classes: np.ndarray, arrays: dict[str, np.ndarray]
) -> Pipeline:
    vectorizer = _make_vectorizer(config)
    vocabulary = arrays["vocabulary_terms"].tolist()
    vectorizer.vocabulary_ = dict(
        zip(vocabulary, arrays["vocabulary_indices"].tolist(), strict=True)
    )
    vectorizer.idf_ = arrays["idf_"]  # the public setter builds the inner TfidfTransformer
    clf = _make_clf(config)
    for name in _model_array_names(config.kind):
        setattr(clf, name, arrays[name])
    clf.classes_ = classes
    clf.n_features_in_ = len(vocabulary)
    return Pipeline([("tfidf", vectorizer), ("clf", clf)])
