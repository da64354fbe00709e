"""One runtime per loaded model (core.models.device.Runtime): the rules that choose device and
precision, one answer per complaint on every consumer under bf16 (Classify, Explain, the command
line, the positional ablation), the command line's --device, and the shared model cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.analysis.explain import ExplainConfig, explain_text
from core.analysis.order_ablation import order_ablation_of
from core.models import device as device_module
from core.models.blend import Blend
from core.models.cache import ModelCache, cache_key, model_bytes
from core.models.card import card_digest
from core.models.classify import classify_one
from core.models.device import PRECISION_ENV, Runtime
from core.models.registry import load_model
from tests.helpers import ROOT, TINY_LABELS, TINY_TEXTS, run_cli, with_blend

TEXT = "upi payment failed and money debited twice, refund pending since yesterday"
CPU = torch.device("cpu")


# --------------------------------------------------------------------------- the rules


@pytest.fixture
def no_cuda(monkeypatch):
    """A machine without CUDA, whatever this one has."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv(PRECISION_ENV, raising=False)


@pytest.mark.parametrize(("fast_bf16", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_on_a_cpu_is_bf16_only_where_the_cpu_is_fast(
    no_cuda, monkeypatch, fast_bf16, expected
):
    monkeypatch.setattr(device_module, "cpu_has_fast_bf16", lambda: fast_bf16)
    assert Runtime.resolve() == Runtime(CPU, expected)
    assert Runtime.resolve("cpu", "fp32") == Runtime(CPU, "fp32")  # asked for: kept
    assert Runtime.resolve("cpu", "bf16") == Runtime(CPU, "bf16")


@pytest.mark.parametrize(("supported", "expected"), [(True, "bf16"), (False, "fp32")])
def test_auto_picks_cuda_and_bf16_where_the_gpu_supports_it(monkeypatch, supported, expected):
    monkeypatch.delenv(PRECISION_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: supported)
    monkeypatch.setattr(device_module, "cpu_has_fast_bf16", lambda: True)
    assert Runtime.resolve() == Runtime(torch.device("cuda"), expected)
    assert Runtime.resolve("cpu") == Runtime(CPU, "bf16")  # the CPU's own rule


def test_the_operators_precision_decides_auto_only(no_cuda, monkeypatch):
    monkeypatch.setattr(device_module, "cpu_has_fast_bf16", lambda: False)
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    assert Runtime.resolve("cpu") == Runtime(CPU, "bf16")
    assert Runtime.resolve("cpu", "fp32").precision == "fp32"  # an explicit choice wins
    monkeypatch.setenv(PRECISION_ENV, "fp8")
    with pytest.raises(ValueError, match=PRECISION_ENV):
        Runtime.resolve("cpu")


def test_cuda_without_a_gpu_and_unknown_settings_are_refused(no_cuda):
    with pytest.raises(ValueError, match="no CUDA GPU"):
        Runtime.resolve("cuda")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        Runtime.resolve(torch.device("cuda"))
    with pytest.raises(ValueError, match="device must be one of"):
        Runtime.resolve("tpu")
    with pytest.raises(ValueError, match="precision must be one of"):
        Runtime.resolve("cpu", "fp16")


def test_autocast_follows_the_precision():
    a, b = torch.ones(2, 3), torch.ones(3, 2)
    with Runtime(CPU, "bf16").autocast():
        assert (a @ b).dtype == torch.bfloat16
    with Runtime(CPU, "fp32").autocast():
        assert (a @ b).dtype == torch.float32
    assert Runtime(CPU, "bf16").to_json() == {"device": "cpu", "precision": "bf16"}


# --------------------------------------------------------------------------- one answer


@pytest.fixture
def bf16_model(tiny_bert_cls_model_dir, monkeypatch):
    """The session's tiny [CLS] BERT loaded on the CPU with bf16 forced by the operator's
    variable."""
    monkeypatch.setenv(PRECISION_ENV, "bf16")
    loaded = load_model(tiny_bert_cls_model_dir, device="cpu")
    assert loaded.neural.runtime == Runtime(CPU, "bf16")
    return loaded


def _ordered(probabilities: dict[str, float], classes) -> np.ndarray:
    return np.array([probabilities[str(c)] for c in classes])


def test_bf16_really_changes_the_answer(bf16_model, tiny_bert_cls_model_dir):
    """The agreement below means something: fp32 (what Explain used to report) differs."""
    fp32 = load_model(tiny_bert_cls_model_dir, device="cpu", precision="fp32").neural
    difference = fp32.predict_proba([TEXT]) - bf16_model.neural.predict_proba([TEXT])
    assert np.abs(difference).max() > 1e-5


@pytest.mark.slow  # one real `python -m core` process: importing torch takes seconds
def test_classify_explain_and_the_command_line_agree_under_bf16(
    bf16_model, tiny_bert_cls_model_dir
):
    classes = bf16_model.neural.classes_
    one = classify_one(bf16_model, TEXT, review_threshold=0.5)
    expected = _ordered(one.probabilities["transformer"], classes)
    expl = explain_text(bf16_model.neural, bf16_model.bow, TEXT, ExplainConfig(n_steps=4))
    decision = bf16_model.blend.decide(expl.neural, expl.bow)
    env = {**os.environ, PRECISION_ENV: "bf16"}
    command = [sys.executable, "-m", "core", "explain", "--model", str(tiny_bert_cls_model_dir)]
    done = subprocess.run(
        [*command, TEXT, "--device", "cpu", "--json"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["runtime"] == {"device": "cpu", "precision": "bf16"}
    for probabilities in (expl.neural.probabilities, document["transformer"]["probabilities"]):
        np.testing.assert_allclose(_ordered(probabilities, classes), expected, atol=1e-6, rtol=0)
    assert expl.neural.label == one.row["transformer_label"]
    assert expl.target == one.row["transformer_label"]  # the desk explained is the one shown
    assert decision.label == one.row["predicted_label"] == document["decision"]["label"]


def test_the_normal_variant_of_the_ablation_is_the_models_own_call_under_bf16(bf16_model):
    neural = bf16_model.neural
    result = order_ablation_of(neural, TEXT)
    normal = _ordered(result.normal.prediction.probabilities, neural.classes_)
    np.testing.assert_allclose(normal, neural.predict_proba([TEXT])[0], atol=1e-6, rtol=0)
    assert result.normal.position_ids == tuple(range(len(result.tokens)))


# --------------------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def labelled(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("runtime-data") / "labelled.csv"
    rows = "\n".join(f"{t},{label}" for t, label in zip(TINY_TEXTS, TINY_LABELS, strict=True))
    path.write_text(f"text,label\n{rows}\n", encoding="utf-8")
    return path


def test_device_cuda_without_a_gpu_is_one_error_line(no_cuda, tiny_model_dir, labelled):
    model = ["--model", str(tiny_model_dir)]
    commands = [
        ["classify", *model, str(labelled)],
        ["evaluate", *model, str(labelled)],
        ["explain", *model, "card stolen"],
        ["probe", *model, "card stolen"],
        ["audit", str(labelled), "--model", str(tiny_model_dir), "--folds", "2"],
    ]
    for command in commands:
        result = run_cli(*command, "--device", "cuda")
        assert result.returncode == 2, (command, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), command
        assert "cuda" in lines[0].lower() and result.stdout == ""


def test_the_command_lines_precision_reaches_the_model(tiny_model_dir):
    result = run_cli(
        "explain", "--model", str(tiny_model_dir), "card stolen", "--precision", "fp32",
        "--device", "cpu", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["runtime"] == {"device": "cpu", "precision": "fp32"}


# --------------------------------------------------------------------------- the model cache


def _fake_cache(sizes: dict[str, int], budget: int) -> tuple[ModelCache, list[str]]:
    """A cache over fake models named by folder, `sizes[name]` bytes each; the list records
    every load."""
    loads: list[str] = []

    def loader(folder, *, digest):
        loads.append(Path(folder).name)
        return SimpleNamespace(name=Path(folder).name, digest=digest)

    return ModelCache(budget, loader=loader, sizer=lambda m: sizes[m.name]), loads


def test_the_least_recently_used_model_goes_first_when_the_bytes_run_out():
    cache, loads = _fake_cache({"a": 40, "b": 40, "c": 40, "big": 500}, budget=100)
    cache.get("models/a", "1")
    cache.get("models/b", "1")
    cache.get("models/a", "1")  # a is now the more recent
    assert cache.keys() == ["b@1", "a@1"] and cache.used_bytes == 80
    cache.get("models/c", "1")  # 120 bytes: b goes
    assert cache.keys() == ["a@1", "c@1"] and cache.used_bytes == 80
    cache.get("models/big", "1")  # over the budget alone: still kept, as the newest
    assert cache.keys() == ["big@1"]
    assert loads == ["a", "b", "c", "big"]


def test_the_key_is_the_card_digest(tiny_model_dir, tmp_path):
    cache = ModelCache()
    digest = card_digest(tiny_model_dir)
    first = cache.get(tiny_model_dir, digest)
    assert cache.get(tiny_model_dir, digest) is first  # loaded once
    assert cache.keys() == [first.key] == [cache_key(tiny_model_dir, digest)]
    # The same name saved again (another card): another version, another entry.
    again = with_blend(tiny_model_dir, tmp_path / "tiny-test", Blend(0.5))
    other = cache.get(again, card_digest(again))
    assert other is not first and other.digest != first.digest
    assert cache.keys() == [first.key, other.key]
    with pytest.raises(ValueError, match="changed on disk"):
        cache.get(again, "0" * 64)  # the folder does not hold that version


def test_model_bytes_counts_weights_and_bag_of_words(tiny_model_dir, tiny_bert_cls_model_dir):
    models = [load_model(tiny_model_dir), load_model(tiny_bert_cls_model_dir)]
    for loaded in models:
        weights = sum(p.numel() * p.element_size() for p in loaded.neural.model.parameters())
        assert model_bytes(loaded) > weights
    # A budget for the larger of the two alone: loading the other evicts the first.
    cache = ModelCache(max(model_bytes(m) for m in models) + 1)
    for folder in (tiny_model_dir, tiny_bert_cls_model_dir):
        cache.get(folder, card_digest(folder))
    assert cache.keys() == [
        cache_key(tiny_bert_cls_model_dir, card_digest(tiny_bert_cls_model_dir))
    ]


def test_sessions_asking_at_once_share_one_load():
    cache, loads = _fake_cache({"a": 1}, budget=10)
    results: list[object] = []
    threads = [
        threading.Thread(target=lambda: results.append(cache.get("models/a", "1")))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loads == ["a"] and len(results) == 4 and all(r is results[0] for r in results)


def test_the_budget_comes_from_the_environment():
    assert ModelCache.from_env({"GRIEVANCE_LENS_MODEL_CACHE_MB": "3"}).budget_bytes == 3 * 2**20
    assert ModelCache.from_env({}).budget_bytes == 2048 * 2**20
    with pytest.raises(ValueError, match="GRIEVANCE_LENS_MODEL_CACHE_MB"):
        ModelCache.from_env({"GRIEVANCE_LENS_MODEL_CACHE_MB": "lots"})
