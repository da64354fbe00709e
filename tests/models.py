"""Build and save a tiny, quickly trained model for page and CLI tests (no download)."""

from pathlib import Path

from core.data.dataset import Dataset, split_dataset
from core.models.registry import save_model
from core.models.transformer.config import TrainConfig
from core.models.transformer.training import train_models

TEXTS = [
    "upi payment failed but money debited",
    "upi refund not received after failed payment",
    "card used for a purchase i never made",
    "fraud transaction on my credit card",
    "emi charged twice on my home loan",
    "loan statement not received this month",
    "please update my kyc address",
    "kyc documents rejected again",
]
LABELS = ["UPI Dispute", "UPI Dispute", "Card Fraud", "Card Fraud", "Loan Query", "Loan Query",
          "KYC Update", "KYC Update"]  # fmt: skip


def save_tiny_model(folder: Path, *, max_steps: int = 20) -> Path:
    """Train the from-scratch tiny transformer for a few steps and save it to `folder`."""
    dataset = Dataset(TEXTS * 4, LABELS * 4)
    train, val = split_dataset(dataset, val_fraction=0.25, seed=0)
    config = TrainConfig(backbone="tiny", lr=1e-3, epochs=20, max_steps=max_steps, batch_size=8)
    result = train_models(train, val, config)
    return save_model(result, folder, data_fingerprint=dataset.fingerprint)
