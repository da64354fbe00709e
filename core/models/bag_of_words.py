"""The bag of words: TF-IDF over the project's words + logistic regression or naive Bayes.

It sees each text as a multiset of words (plus, optionally, n-grams) after personal data is
masked (core.data.privacy), so two texts with the same masked bag of words get the same
prediction and no card or phone number becomes a feature. Saved as plain arrays (npz + json).

Fitting uses scikit-learn (TfidfVectorizer, then LogisticRegression or MultinomialNB). The fitted
model keeps only their arrays and predicts with numpy, the arithmetic of scikit-learn's
`transform` and `predict_proba` step for step (tests/test_bag_of_words.py holds the two equal to
1e-12): loading and predicting never import scikit-learn (and SciPy with it), which is most of
a second of every `python -m core classify`.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from core.checks import check_int, check_positive, check_texts
from core.data.privacy import MASKING_VERSION, mask_personal_data
from core.errors import UserError
from core.paths import read_json
from core.text import WordSpan, word_spans, words

if TYPE_CHECKING:  # scikit-learn is imported by fitting only
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import Pipeline

NPZ_NAME = "baseline.npz"
JSON_NAME = "baseline.json"
FORMAT_NAME = "grievance-lens-baseline"
FORMAT_VERSION = 1
KINDS = ("logreg", "nb")


@dataclass(frozen=True)
class BagOfWordsConfig:
    """How to build the bag of words."""

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


DEFAULT_CONFIG = BagOfWordsConfig()


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


@dataclass(frozen=True)
class TfidfRows:
    """TF-IDF rows in scipy's CSR layout, without scipy: row i holds the features
    `indices[indptr[i]:indptr[i + 1]]` (ascending) with the values `data[...]` of the same span."""

    indptr: np.ndarray  # (n_rows + 1,) int64
    indices: np.ndarray  # (nnz,) int64, feature columns
    data: np.ndarray  # (nnz,) float64

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    def row_ids(self) -> np.ndarray:
        """The row of every stored value, (nnz,)."""
        return np.repeat(np.arange(self.n_rows), np.diff(self.indptr))


class BagOfWordsClassifier:
    """TF-IDF over `core.text.words` n-grams, then LogisticRegression or MultinomialNB.

    Follows scikit-learn's estimator conventions (`fit` returns self, `get_params`, so
    `sklearn.base.clone` works) without importing it outside `fit`.

    Parameters
    ----------
    config : BagOfWordsConfig
        Model kind, n-gram order and regularisation.

    Attributes
    ----------
    classes_ : np.ndarray of str, shape (n_classes,)
        Sorted class labels; the column order of `predict_proba`.
    vocabulary_ : dict of str to int
        Each term (a word, or n words joined by a space) and its feature column.
    idf_ : np.ndarray, shape (n_features,)
        Inverse document frequency of each feature.
    coef_, intercept_ : np.ndarray, shapes (n_rows, n_features) and (n_rows,)
        Logistic regression weights (kind "logreg"); one row for two classes, as scikit-learn.
    feature_log_prob_, class_log_prior_ : np.ndarray, shapes (n_classes, n_features), (n_classes,)
        Naive Bayes log-probabilities (kind "nb").
    """

    def __init__(self, config: BagOfWordsConfig = DEFAULT_CONFIG) -> None:
        self.config = config

    def __repr__(self) -> str:
        return f"BagOfWordsClassifier(config={self.config!r})"

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's arguments (scikit-learn's estimator interface)."""
        return {"config": self.config}

    def set_params(self, **params: Any) -> BagOfWordsClassifier:
        """Set constructor arguments (scikit-learn's estimator interface); returns self."""
        unknown = set(params) - {"config"}
        if unknown:
            raise ValueError(f"unknown parameters {sorted(unknown)}; the only one is 'config'")
        self.config = params.get("config", self.config)
        return self

    def fit(self, texts: Sequence[str], labels: Sequence[str]) -> BagOfWordsClassifier:
        """Learn the vocabulary, IDF weights and classifier from `texts` and their `labels`."""
        _check_config(self.config)
        texts = check_texts(texts)
        labels = _check_labels(labels, n=len(texts))
        if not any(words(t) for t in texts):
            raise UserError("the training texts contain no words; give texts with some words")
        pipeline = _fit_pipeline(self.config, texts, labels)
        arrays = _pipeline_arrays(pipeline, kind=self.config.kind)
        self._set_fitted(np.asarray(pipeline.classes_, dtype=str), arrays)
        return self

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes), columns in `classes_` order."""
        self._check_fitted()
        texts = check_texts(texts, allow_empty=True)
        if not texts:
            return np.empty((0, len(self.classes_)), dtype=np.float64)
        scores = self._raw_scores(self.transform(texts))
        return _probabilities(scores, kind=self.config.kind)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """The most probable class of each text."""
        pred_probs = self.predict_proba(texts)
        return [str(self.classes_[i]) for i in pred_probs.argmax(axis=1)]

    def transform(self, texts: Sequence[str]) -> TfidfRows:
        """The TF-IDF rows of `texts`, as TfidfVectorizer.transform computes them: in-vocabulary
        term counts, 1 + log(count) when sublinear, times IDF, each row scaled to unit L2 norm
        (an all-zero row stays zero)."""
        self._check_fitted()
        rows = self._count_rows(check_texts(texts, allow_empty=True))
        data = rows.data
        if self.config.sublinear_tf:
            data = np.log(data) + 1.0
        data = data * self.idf_[rows.indices]
        row_ids = rows.row_ids()
        norms = np.sqrt(np.bincount(row_ids, weights=data * data, minlength=rows.n_rows))
        norms[norms == 0.0] = 1.0
        return TfidfRows(rows.indptr, rows.indices, data / norms[row_ids])

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

    def nbytes(self, *, bytes_per_term: int = 100) -> int:
        """An estimate of the memory the fitted model holds: its arrays plus `bytes_per_term` for
        each vocabulary entry (a str key and an int in a dict), without building the pipeline."""
        self._check_fitted()
        arrays = [self.idf_, *(getattr(self, n) for n in _model_array_names(self.config.kind))]
        return sum(a.nbytes for a in arrays) + bytes_per_term * len(self.vocabulary_)

    @property
    def pipeline_(self) -> Pipeline:
        """The same model as a fitted scikit-learn Pipeline ("tfidf", "clf"), built on first use
        (it imports scikit-learn): for code that wants scikit-learn's own objects."""
        self._check_fitted()
        if self._pipeline is None:
            self._pipeline = _rebuild_pipeline(self.config, self.classes_, self._arrays())
        return self._pipeline

    def save(self, directory: str | Path) -> None:
        """Write `baseline.npz` (arrays) and `baseline.json` (config, classes) into `directory`."""
        import sklearn  # the release that fitted the arrays, recorded with them

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
            "n_features": len(self.vocabulary_),
            "text_masking": MASKING_VERSION,
            "sklearn_version": sklearn.__version__,
        }
        (directory / JSON_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")

    @classmethod
    def load(cls, directory: str | Path) -> BagOfWordsClassifier:
        """Rebuild a fitted model from a folder written by `save` (no pickle, no scikit-learn:
        the arrays are all the numpy predictor needs, whichever release fitted them)."""
        directory = Path(directory)
        meta = _read_meta(directory / JSON_NAME)
        config = _config_from_meta(meta, directory / JSON_NAME)
        classes = np.asarray(meta["classes"], dtype=str)
        arrays = _read_arrays(directory / NPZ_NAME, kind=config.kind)
        _check_arrays(arrays, kind=config.kind, n_classes=len(classes), path=directory / NPZ_NAME)
        model = cls(config)
        model._set_fitted(classes, arrays)
        return model

    def _set_fitted(self, classes: np.ndarray, arrays: dict[str, np.ndarray]) -> None:
        """Take the fitted state from the arrays `save` writes."""
        terms, indices = arrays["vocabulary_terms"].tolist(), arrays["vocabulary_indices"].tolist()
        self.vocabulary_ = dict(zip(terms, indices, strict=True))
        self.idf_ = arrays["idf_"]
        for name in _model_array_names(self.config.kind):
            setattr(self, name, arrays[name])
        self.classes_ = classes
        self._pipeline: Pipeline | None = None

    def _check_fitted(self) -> None:
        if not hasattr(self, "classes_"):
            from sklearn.exceptions import NotFittedError  # what scikit-learn users catch

            raise NotFittedError("this BagOfWordsClassifier is not fitted; call fit() or load()")

    def _count_rows(self, texts: list[str]) -> TfidfRows:
        """In-vocabulary term counts of each masked text, features ascending within a row."""
        indptr, indices, counts = [0], [], []
        for text in texts:
            found = _ngram_occurrences(masked_words(text), self.vocabulary_, self.config)
            bag = Counter(feature for feature, _, _ in found)
            indices.extend(sorted(bag))
            counts.extend(bag[feature] for feature in sorted(bag))
            indptr.append(len(indices))
        return TfidfRows(
            np.asarray(indptr, dtype=np.int64),
            np.asarray(indices, dtype=np.int64),
            np.asarray(counts, dtype=np.float64),
        )

    def _raw_scores(self, rows: TfidfRows) -> np.ndarray:
        """X @ weights.T + intercepts, (n_rows, n_weight_rows): logreg's decision function or
        naive Bayes' joint log-likelihood. One weighted bincount per weight row keeps the memory
        at the size of the rows, whatever the number of desks."""
        weights, intercepts = self._raw_weights()
        row_ids = rows.row_ids()
        scores = np.empty((rows.n_rows, len(weights)), dtype=np.float64)
        for k, w in enumerate(weights):
            products = rows.data * w[rows.indices]
            scores[:, k] = np.bincount(row_ids, weights=products, minlength=rows.n_rows)
        return scores + intercepts

    def _raw_weights(self) -> tuple[np.ndarray, np.ndarray]:
        if self.config.kind == "nb":
            return self.feature_log_prob_, self.class_log_prior_
        return self.coef_, self.intercept_

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
        weights, intercepts = self._raw_weights()
        if self.config.kind == "logreg" and len(self.classes_) == 2:  # logits (0, z)
            weights = np.vstack([np.zeros_like(weights), weights])
            intercepts = np.array([0.0, intercepts[0]])
        return weights - weights.mean(axis=0), intercepts - intercepts.mean()

    def _word_scores(self, text: str, class_weights: np.ndarray) -> np.ndarray:
        """Share each n-gram feature's contribution among its occurrences and their words."""
        tokens = words(text)
        x = self.transform([text])
        contribution = dict(zip(x.indices.tolist(), x.data * class_weights[x.indices], strict=True))
        occurrences = _ngram_occurrences(tokens, self.vocabulary_, self.config)
        counts = Counter(feature for feature, _, _ in occurrences)
        scores = np.zeros(len(tokens), dtype=np.float64)
        for feature, start, n in occurrences:
            scores[start : start + n] += contribution.get(feature, 0.0) / counts[feature] / n
        return scores

    def _arrays(self) -> dict[str, np.ndarray]:
        return _saved_arrays(self.vocabulary_, self.idf_, self, kind=self.config.kind)


def _probabilities(scores: np.ndarray, *, kind: str) -> np.ndarray:
    """predict_proba from raw scores, as scikit-learn computes it: naive Bayes normalises the
    joint log-likelihood (log-sum-exp); binary logreg is the logistic of its one decision
    column, [1 - p, p]; multinomial logreg is the softmax of the decision function."""
    if kind == "nb":
        top = scores.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(scores - top).sum(axis=1, keepdims=True)) + top
        return np.exp(scores - log_norm)
    if scores.shape[1] == 1:
        z = scores[:, 0]
        e = np.exp(-np.abs(z))  # never overflows, whatever the sign of z
        p = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        return np.stack([1.0 - p, p], axis=1)
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def fit_bow(
    texts: Sequence[str], labels: Sequence[str], *, config: BagOfWordsConfig = DEFAULT_CONFIG
) -> BagOfWordsClassifier:
    """Fit and return a `BagOfWordsClassifier` built from `config`."""
    return BagOfWordsClassifier(config).fit(texts, labels)


def _check_config(config: object) -> None:
    if not isinstance(config, BagOfWordsConfig):
        raise TypeError(f"config must be a BagOfWordsConfig, got {type(config).__name__}")


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
    """The words the bag of words reads: `words` of the text with personal data masked."""
    return words(mask_personal_data(text))


def _fit_pipeline(config: BagOfWordsConfig, texts: list[str], labels: np.ndarray) -> Pipeline:
    from sklearn.pipeline import Pipeline

    pipeline = Pipeline([("tfidf", _make_vectorizer(config)), ("clf", _make_clf(config))])
    return pipeline.fit(texts, labels)


def _pipeline_arrays(pipeline: Pipeline, *, kind: str) -> dict[str, np.ndarray]:
    """The arrays of a fitted pipeline, as `save` writes them."""
    vectorizer = pipeline["tfidf"]
    return _saved_arrays(vectorizer.vocabulary_, vectorizer.idf_, pipeline["clf"], kind=kind)


def _saved_arrays(
    vocabulary: dict[str, int], idf: np.ndarray, weights: object, *, kind: str
) -> dict[str, np.ndarray]:
    """The npz arrays: IDF, the vocabulary as terms in column order with their columns, and the
    classifier arrays of `kind` read from `weights` (a fitted estimator or this model)."""
    terms = sorted(vocabulary, key=vocabulary.__getitem__)
    arrays = {
        "idf_": np.asarray(idf, dtype=np.float64),
        "vocabulary_terms": np.asarray(terms, dtype=str),
        "vocabulary_indices": np.asarray([vocabulary[t] for t in terms], np.int64),
    }
    for name in _model_array_names(kind):
        arrays[name] = np.asarray(getattr(weights, name), dtype=np.float64)
    return arrays


def _make_vectorizer(config: BagOfWordsConfig) -> TfidfVectorizer:
    from sklearn.feature_extraction.text import TfidfVectorizer

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


def _make_clf(config: BagOfWordsConfig) -> LogisticRegression | MultinomialNB:
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import MultinomialNB

    if config.kind == "nb":
        return MultinomialNB(alpha=config.alpha)
    return LogisticRegression(C=config.C, max_iter=config.max_iter, random_state=config.seed)


def _ngram_occurrences(
    tokens: list[str], vocabulary: dict[str, int], config: BagOfWordsConfig
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


def _config_from_meta(meta: dict, path: Path) -> BagOfWordsConfig:
    try:
        config = BagOfWordsConfig(**meta["config"])
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
    config: BagOfWordsConfig, classes: np.ndarray, arrays: dict[str, np.ndarray]
) -> Pipeline:
    """A fitted scikit-learn Pipeline holding `arrays` (imports scikit-learn)."""
    from sklearn.pipeline import Pipeline

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
