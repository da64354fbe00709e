"""The whole-process baseline of bench_inference: what a newcomer's script does with a saved model.

    python -m bench.pipeline_script MODEL_DIR IN.csv OUT.csv

Imports only pandas, transformers and the module that registers the project's mean-pooled model
type, builds `pipeline("text-classification")` (one text per call, its default), classifies the
`text` column and writes it back with `predicted_label`.
"""

from __future__ import annotations

import sys

import pandas as pd
from transformers import pipeline

import core.models.transformer.head  # noqa: F401  (registers the mean-pooled model type)


def main(folder: str, source: str, out: str) -> None:
    table = pd.read_csv(source)
    classify = pipeline("text-classification", model=folder, device="cpu")
    outputs = classify(table["text"].fillna("").astype(str).tolist(), truncation=True)
    table["predicted_label"] = [o["label"] for o in outputs]
    table.to_csv(out, index=False)


if __name__ == "__main__":
    main(*sys.argv[1:4])
