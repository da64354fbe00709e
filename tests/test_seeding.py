"""A training's randomness is its own: the same seed gives the same weights when other trainings
and other draws from torch's global generator run at the same time (core.models.seeding)."""

import threading

import pytest
import torch
from torch import nn

from core.models.seeding import SEEDED_ATTENTION, SeededDropout, seeded_dropout
from core.models.transformer.config import TrainConfig
from core.models.transformer.training import fine_tune
from tests.conftest import make_dataset, separable_rows


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _train(backbone: str, seed: int, pooling: str = "mean") -> dict[str, torch.Tensor]:
    data = make_dataset(*separable_rows(4))
    config = TrainConfig(
        backbone=backbone, pooling=pooling, lr=1e-2, batch_size=4, max_length=32, max_steps=6,
        device="cpu", seed=seed, classifier_dropout=0.5,
    )  # fmt: skip
    neural, _ = fine_tune(data, data, config)
    return _weights(neural.model)


def _hammer_global_rng(stop: threading.Event) -> None:
    while not stop.is_set():
        torch.manual_seed(int(torch.randint(0, 1000, ())))  # a careless neighbour
        torch.rand(64)


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_concurrent_trainings_give_the_weights_each_gives_alone(tiny_bert_dir, pooling):
    backbone = str(tiny_bert_dir)
    alone = _train(backbone, 1, pooling)
    results: dict[int, dict[str, torch.Tensor]] = {}
    stop = threading.Event()
    noise = threading.Thread(target=_hammer_global_rng, args=(stop,))
    runs = [
        threading.Thread(target=lambda s=s: results.__setitem__(s, _train(backbone, s, pooling)))
        for s in (1, 2)
    ]
    noise.start()
    for run in runs:
        run.start()
    for run in runs:
        run.join(120)
    stop.set()
    noise.join(10)
    assert alone.keys() == results[1].keys()
    for name, tensor in alone.items():
        torch.testing.assert_close(results[1][name], tensor, rtol=0, atol=0, msg=name)
    assert any(not torch.equal(results[2][k], alone[k]) for k in alone)  # the seed matters


def test_the_tiny_transformer_is_seeded_by_its_own_generator():
    first = _train("tiny", 3)
    torch.manual_seed(99)
    torch.rand(1000)
    assert all(torch.equal(first[k], v) for k, v in _train("tiny", 3).items())


def test_seeded_dropout_draws_from_its_generator_and_is_restored(tiny_bert_dir):
    from core.models.transformer.backbone import load_backbone

    model, _ = load_backbone(TrainConfig(backbone=str(tiny_bert_dir), max_length=32), ["a", "b"])
    ids = torch.randint(5, 20, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    model.train()
    outputs = []
    for _ in range(2):
        with seeded_dropout(model, torch.Generator().manual_seed(7)):
            assert model.config._attn_implementation == SEEDED_ATTENTION
            assert any(isinstance(m, SeededDropout) for m in model.modules())
            torch.manual_seed(int(torch.randint(0, 100, ())))  # the global generator moves
            outputs.append(model(input_ids=ids, attention_mask=mask).logits)
    torch.testing.assert_close(outputs[0], outputs[1], rtol=0, atol=0)
    assert model.config._attn_implementation == "eager"
    assert not any(isinstance(m, SeededDropout) for m in model.modules())
    model.eval()
    with torch.no_grad():
        assert not torch.allclose(model(input_ids=ids, attention_mask=mask).logits, outputs[0])


def test_seeded_attention_matches_eager_attention_without_dropout(tiny_bert_dir):
    from core.models.transformer.backbone import load_backbone

    model, _ = load_backbone(TrainConfig(backbone=str(tiny_bert_dir), max_length=32), ["a", "b"])
    model.eval()
    ids = torch.randint(5, 20, (2, 9), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        eager = model(input_ids=ids, attention_mask=mask).logits
        with seeded_dropout(model, torch.Generator().manual_seed(0)):
            seeded = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(seeded, eager)
