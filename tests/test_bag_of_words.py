"""The bag of words: probabilities, bag-of-words invariance, contributions, persistence."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from core.models.bag_of_words import (
    JSON_NAME,
    NPZ_NAME,
    BagOfWordsClassifier,
    BagOfWordsConfig,
    fit_bow,
)
from core.text import word_spans

ROOT = Path(__file__).resolve().parents[1]

TRAIN = [
    ("UPI payment failed but money was debited", "UPI Dispute"),
    ("I paid by UPI and the UPI transfer is pending", "UPI Dispute"),
    ("UPI reference not credited to the beneficiary", "UPI Dispute"),
    ("paid by UPI not by card", "UPI Dispute"),
    ("unknown card transaction I did not make", "Card Fraud"),
    ("my card was charged twice, fraud", "Card Fraud"),
    ("paid by card and the card got blocked", "Card Fraud"),
    ("paid by card not by UPI", "Card Fraud"),
    ("loan EMI interest rate query", "Loan Query"),
    ("home loan statement needed", "Loan Query"),
    ("loan prepayment charges are too high", "Loan Query"),
]
TEXTS = [t for t, _ in TRAIN]
LABELS = [y for _, y in TRAIN]
CARD_FIRST = "I paid by card, not by UPI"
UPI_FIRST = "I paid by UPI, not by card"
CONFIGS = [
    BagOfWordsConfig(),
    BagOfWordsConfig(ngram_max=2),
    BagOfWordsConfig(kind="nb"),
    BagOfWordsConfig(kind="nb", ngram_max=2),
]


@pytest.fixture(scope="module", params=CONFIGS, ids=["logreg1", "logreg2", "nb1", "nb2"])
def model(request):
    return fit_bow(TEXTS, LABELS, config=request.param)


@pytest.fixture(scope="module")
def logreg():
    return fit_bow(TEXTS, LABELS)


def centred_log_proba(model, text):
    log_p = np.log(model.predict_proba([text])[0])
    return log_p - log_p.mean()


def test_predict_proba_shape_dtype_and_rows_sum_to_one(model):
    probs = model.predict_proba([CARD_FIRST, "loan EMI", "", "words never seen"])
    assert probs.shape == (4, 3)
    assert probs.dtype == np.float64
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert model.predict_proba([]).shape == (0, 3)


def test_classes_sorted_strings_and_predict_matches_argmax(model):
    assert model.classes_.tolist() == ["Card Fraud", "Loan Query", "UPI Dispute"]
    assert model.classes_.dtype.kind == "U"
    texts = ["home loan interest", "card fraud transaction", "UPI transfer failed"]
    predicted = model.predict(texts)
    assert predicted == ["Loan Query", "Card Fraud", "UPI Dispute"]
    assert all(type(p) is str for p in predicted)
    assert predicted == model.classes_[model.predict_proba(texts).argmax(axis=1)].tolist()


@pytest.mark.parametrize("kind", ["logreg", "nb"])
def test_same_bag_of_words_gets_identical_probabilities(kind):
    model = fit_bow(TEXTS, LABELS, config=BagOfWordsConfig(kind=kind))
    probs = model.predict_proba([CARD_FIRST, UPI_FIRST])
    assert np.array_equal(probs[0], probs[1])


def test_bigrams_are_the_only_word_order_the_bag_of_words_sees():
    model = fit_bow(TEXTS, LABELS, config=BagOfWordsConfig(ngram_max=2))
    probs = model.predict_proba([CARD_FIRST, UPI_FIRST])
    assert not np.allclose(probs[0], probs[1])
    card = list(model.classes_).index("Card Fraud")
    assert probs[0, card] > probs[1, card]  # "card not" was seen in a Card Fraud text


def test_default_config_and_fit_are_deterministic():
    assert BagOfWordsConfig().kind == "logreg" and BagOfWordsConfig().ngram_max == 1
    a = BagOfWordsClassifier().fit(TEXTS, LABELS).predict_proba([CARD_FIRST, "loan"])
    b = BagOfWordsClassifier().fit(TEXTS, LABELS).predict_proba([CARD_FIRST, "loan"])
    assert np.array_equal(a, b)


def test_fit_returns_self_and_clone_gives_an_unfitted_copy(logreg):
    model = BagOfWordsClassifier(BagOfWordsConfig(kind="nb"))
    assert model.fit(TEXTS, LABELS) is model
    copy = clone(model)
    assert copy.config == model.config and not hasattr(copy, "pipeline_")


def test_vectorizer_uses_the_project_word_definition(logreg):
    vocabulary = logreg.pipeline_["tfidf"].vocabulary_
    assert {"i", "upi", "emi", "by"} <= set(vocabulary)  # one-letter and upper-case words kept
    assert all(term == term.lower() for term in vocabulary)


def test_contributions_align_with_word_spans(model):
    text = "I paid by UPI, NOT by card; zzqx"
    contributions = model.word_contributions(text)
    assert contributions.words == tuple(word_spans(text))
    assert len(contributions.scores) == len(contributions.words) == 8
    assert contributions.words[3].text == "UPI"  # original casing kept
    assert contributions.scores[-1] == 0.0  # out of vocabulary
    assert contributions.probabilities == dict(
        zip(model.classes_.tolist(), model.predict_proba([text])[0].tolist(), strict=True)
    )


@pytest.mark.parametrize("text", [CARD_FIRST, "loan loan card UPI refund", "zzqx", ""])
def test_scores_plus_intercept_equal_the_centred_logit(model, text):
    centred = centred_log_proba(model, text)
    for index, label in enumerate(model.classes_):
        contributions = model.word_contributions(text, target=str(label))
        total = sum(contributions.scores) + contributions.intercept
        assert total == pytest.approx(centred[index], abs=1e-9)


def test_sum_identity_holds_for_a_binary_model():
    model = fit_bow(TEXTS[:8], LABELS[:8])
    assert len(model.classes_) == 2
    centred = centred_log_proba(model, CARD_FIRST)
    for index, label in enumerate(model.classes_):
        contributions = model.word_contributions(CARD_FIRST, target=str(label))
        total = sum(contributions.scores) + contributions.intercept
        assert total == pytest.approx(centred[index], abs=1e-9)


def test_contribution_signs_follow_the_training_data(model):
    text = "loan UPI"
    assert model.word_contributions(text, target="Loan Query").scores[0] > 0
    assert model.word_contributions(text, target="UPI Dispute").scores[0] < 0
    assert model.word_contributions(text, target="UPI Dispute").scores[1] > 0


def test_target_defaults_to_the_prediction_and_unknown_target_is_refused(logreg):
    assert logreg.word_contributions("home loan statement").target == "Loan Query"
    assert logreg.word_contributions("home loan", target="Card Fraud").target == "Card Fraud"
    with pytest.raises(ValueError, match="Card Fraud.*Loan Query.*UPI Dispute"):
        logreg.word_contributions("home loan", target="Mortgage")
    with pytest.raises(ValueError, match="unknown target 1"):
        logreg.word_contributions("home loan", target=1)


def test_repeated_word_shares_its_feature_contribution_equally(logreg):
    text = "card loan card card"
    scores = logreg.word_contributions(text, target="Card Fraud").scores
    assert scores[0] == scores[2] == scores[3]
    x = logreg.pipeline_["tfidf"].transform([text]).toarray()[0]
    coef = logreg.pipeline_["clf"].coef_
    j = logreg.pipeline_["tfidf"].vocabulary_["card"]
    card_row = list(logreg.classes_).index("Card Fraud")
    expected = x[j] * (coef[card_row, j] - coef[:, j].mean())
    assert 3 * scores[0] == pytest.approx(expected, abs=1e-12)


def test_bigram_contribution_is_split_between_its_two_words():
    model = fit_bow(TEXTS, LABELS, config=BagOfWordsConfig(ngram_max=2))
    unigram = fit_bow(TEXTS, LABELS)
    assert len(model.word_contributions("card not").scores) == 2
    vocab = model.pipeline_["tfidf"].vocabulary_
    assert "card not" in vocab and "card not" not in unigram.pipeline_["tfidf"].vocabulary_
    # "zzqx card": only the unigram "card" is known, so "zzqx" gets nothing from a bigram
    assert model.word_contributions("zzqx card").scores[0] == 0.0


@pytest.mark.parametrize("config", CONFIGS + [BagOfWordsConfig(min_df=2, sublinear_tf=False)])
def test_save_load_round_trip(tmp_path, config):
    model = fit_bow(TEXTS, LABELS, config=config)
    model.save(tmp_path / "new" / "folder")
    loaded = BagOfWordsClassifier.load(tmp_path / "new" / "folder")
    texts = [CARD_FIRST, UPI_FIRST, "home loan EMI", "", "zzqx"]
    np.testing.assert_allclose(loaded.predict_proba(texts), model.predict_proba(texts), atol=1e-12)
    assert loaded.config == config
    assert loaded.classes_.tolist() == model.classes_.tolist()
    assert loaded.word_contributions(CARD_FIRST) == model.word_contributions(CARD_FIRST)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == [JSON_NAME, NPZ_NAME]


def test_saved_files_are_plain_arrays_and_json(tmp_path, logreg):
    logreg.save(tmp_path)
    with np.load(tmp_path / NPZ_NAME, allow_pickle=False) as npz:
        assert all(npz[name].dtype != object for name in npz.files)
        assert {"idf_", "coef_", "intercept_", "vocabulary_terms"} <= set(npz.files)
    meta = json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))
    assert meta["classes"] == ["Card Fraud", "Loan Query", "UPI Dispute"]
    assert meta["kind"] == "logreg" and meta["config"]["C"] == 10.0
    assert {"sklearn_version", "format_version"} <= set(meta)


def test_binary_model_round_trip(tmp_path):
    model = fit_bow(TEXTS[:8], LABELS[:8])
    model.save(tmp_path)
    loaded = BagOfWordsClassifier.load(tmp_path)
    assert np.array_equal(loaded.predict_proba([CARD_FIRST]), model.predict_proba([CARD_FIRST]))


def test_a_model_another_sklearn_release_saved_loads_silently_and_predicts_alike(tmp_path, logreg):
    # The arrays are the whole model and numpy predicts from them: the release that fitted them
    # no longer matters once they are saved.
    logreg.save(tmp_path)
    meta = json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))
    (tmp_path / JSON_NAME).write_text(json.dumps(meta | {"sklearn_version": "0.24.2"}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = BagOfWordsClassifier.load(tmp_path)
    texts = [CARD_FIRST, "home loan EMI"]
    assert np.array_equal(loaded.predict_proba(texts), logreg.predict_proba(texts))


def test_load_is_silent_for_the_same_sklearn_release(tmp_path, logreg):
    logreg.save(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BagOfWordsClassifier.load(tmp_path)


@pytest.mark.parametrize("missing", [NPZ_NAME, JSON_NAME])
def test_load_refuses_a_missing_file(tmp_path, logreg, missing):
    logreg.save(tmp_path)
    (tmp_path / missing).unlink()
    with pytest.raises(ValueError, match="missing"):
        BagOfWordsClassifier.load(tmp_path)


def test_load_refuses_a_missing_folder(tmp_path):
    with pytest.raises(ValueError, match="missing"):
        BagOfWordsClassifier.load(tmp_path / "nowhere")


def _truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def _scribble(path):
    path.write_bytes(b"this is not an npz archive")


def _single_array(path):
    with path.open("wb") as handle:
        np.save(handle, np.arange(3.0))


def _wrong_shape(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["idf_"] = arrays["idf_"][:-1]
    np.savez(path, **arrays)


def _drop_array(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files if name != "coef_"}
    np.savez(path, **arrays)


def _object_array(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["idf_"] = np.array([{"a": 1}], dtype=object)
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_truncate, "npz"),
        (_scribble, "npz"),
        (_single_array, "single array"),
        (_wrong_shape, "idf_"),
        (_drop_array, "coef_"),
        (_object_array, "npz"),
    ],
)
def test_load_refuses_a_corrupted_npz(tmp_path, logreg, damage, message):
    logreg.save(tmp_path)
    damage(tmp_path / NPZ_NAME)
    with pytest.raises(ValueError, match=message):
        BagOfWordsClassifier.load(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda meta: "{not json", "not valid JSON"),
        (lambda meta: json.dumps({**meta, "format_version": 99}), "format_version"),
        (lambda meta: json.dumps({**meta, "config": {"kind": "svm"}}), "config"),
        (lambda meta: json.dumps({**meta, "classes": ["b", "a", "c"]}), "classes"),
        (lambda meta: json.dumps({**meta, "classes": ["a", "b"]}), "coef_"),
        (lambda meta: json.dumps({**meta, "kind": "nb"}), "kind"),
        (lambda meta: json.dumps([1, 2]), "not a grievance-lens-baseline"),
    ],
)
def test_load_refuses_a_corrupted_json(tmp_path, logreg, edit, message):
    logreg.save(tmp_path)
    meta = json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))
    (tmp_path / JSON_NAME).write_text(edit(meta), encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        BagOfWordsClassifier.load(tmp_path)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "svm"},
        {"ngram_max": 0},
        {"ngram_max": 1.5},
        {"C": 0},
        {"C": float("inf")},
        {"alpha": -1.0},
        {"min_df": 0},
        {"sublinear_tf": 1},
        {"seed": -1},
        {"max_iter": True},
    ],
)
def test_config_rejects_bad_values(kwargs):
    field = next(iter(kwargs))
    with pytest.raises(ValueError, match=field):
        BagOfWordsConfig(**kwargs)


@pytest.mark.parametrize(
    ("texts", "labels", "message"),
    [
        (TEXTS, LABELS[:-1], "labels"),
        (TEXTS[:3], LABELS[:3], "2 distinct labels"),
        ([*TEXTS[:-1], None], LABELS, r"texts\[10\]"),
        ("one string", ["a"] * 10, "not one string"),
        (TEXTS, [*LABELS[:-1], 3], "convert labels to strings"),
        (["", "!!"], ["a", "b"], "no words"),
        ([], [], "empty"),
    ],
)
def test_fit_rejects_bad_input(texts, labels, message):
    with pytest.raises(ValueError, match=message):
        BagOfWordsClassifier().fit(texts, labels)


def test_unfitted_model_refuses_to_predict_or_save(tmp_path):
    model = BagOfWordsClassifier()
    with pytest.raises(NotFittedError, match="fit"):
        model.predict_proba(["text"])
    with pytest.raises(NotFittedError, match="fit"):
        model.save(tmp_path)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------- the numpy predictor against scikit-learn's own

EDGE_TEXTS = [
    "",
    "zzqx qqvv",  # no word in the vocabulary: the intercepts alone
    "card card card card UPI",  # repeats: sublinear term frequency
    "my card 4111 1111 1111 1111 was charged, call 9876543210",  # masked before counting
    "Loan LOAN loan emi EMI",
]
SKLEARN_CONFIGS = [
    *CONFIGS,
    BagOfWordsConfig(min_df=2, sublinear_tf=False),
    BagOfWordsConfig(C=0.5),
]


@pytest.fixture(scope="module")
def demo_split():
    from core.data.demo import DemoConfig, generate_demo_data

    table = generate_demo_data(DemoConfig(rows=360, seed=3))
    texts, labels = table["text"].tolist(), table["desk"].astype(str).tolist()
    return texts[:260], labels[:260], texts[260:] + EDGE_TEXTS


@pytest.mark.parametrize("config", SKLEARN_CONFIGS, ids=lambda c: f"{c.kind}-{c.ngram_max}")
def test_numpy_predictor_matches_the_sklearn_pipeline(demo_split, config):
    train_texts, train_labels, texts = demo_split
    model = fit_bow(train_texts, train_labels, config=config)
    rows = model.transform(texts)
    dense = np.zeros((len(texts), len(model.vocabulary_)))
    dense[rows.row_ids(), rows.indices] = rows.data
    expected = model.pipeline_["tfidf"].transform(texts).toarray()
    np.testing.assert_allclose(dense, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        model.predict_proba(texts), model.pipeline_.predict_proba(texts), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("kind", ["logreg", "nb"])
def test_numpy_predictor_matches_sklearn_for_two_desks(demo_split, kind):
    train_texts, train_labels, texts = demo_split
    pairs = [
        (t, y)
        for t, y in zip(train_texts, train_labels, strict=True)
        if y in {"Card Fraud", "Other"}
    ]
    model = fit_bow(*zip(*pairs, strict=True), config=BagOfWordsConfig(kind=kind))
    assert len(model.classes_) == 2
    np.testing.assert_allclose(
        model.predict_proba(texts), model.pipeline_.predict_proba(texts), rtol=0, atol=1e-12
    )


def test_loaded_model_matches_the_sklearn_pipeline_it_was_fitted_as(tmp_path, demo_split):
    train_texts, train_labels, texts = demo_split
    fitted = fit_bow(train_texts, train_labels, config=BagOfWordsConfig(ngram_max=2))
    fitted.save(tmp_path)
    loaded = BagOfWordsClassifier.load(tmp_path)
    np.testing.assert_allclose(
        loaded.predict_proba(texts), fitted.pipeline_.predict_proba(texts), rtol=0, atol=1e-12
    )


def test_loading_and_predicting_never_import_sklearn_or_scipy(tmp_path, logreg):
    logreg.save(tmp_path)
    script = (
        "import sys\n"
        "from core.models.bag_of_words import BagOfWordsClassifier\n"
        f"model = BagOfWordsClassifier.load({str(tmp_path)!r})\n"
        f"model.predict_proba({[CARD_FIRST, '']!r})\n"
        f"model.word_contributions({UPI_FIRST!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sklearn', 'scipy'}))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_nbytes_counts_the_arrays_and_the_vocabulary(logreg):
    n = len(logreg.vocabulary_)
    arrays = logreg.idf_.nbytes + logreg.coef_.nbytes + logreg.intercept_.nbytes
    assert logreg.nbytes(bytes_per_term=10) == arrays + 10 * n
