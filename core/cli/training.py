"""The model commands: `train` (the neural model and the bag of words, saved together) and
`evaluate` (score a saved pair). Heavy imports (torch, transformers) happen inside the handlers
so `--help` and `validate` stay fast."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from core.cli.common import (
    CommandError,
    add_column_options,
    add_json_option,
    add_model_option,
    add_runtime_options,
    emit_json,
    load_model_from_args,
    progress_bar,
    train_progress,
)

if TYPE_CHECKING:
    from core.models.changes import ModelRecorder

_TRAIN_OPTIONS = {  # CLI flag dest -> TrainConfig field
    "backbone": "backbone", "epochs": "epochs", "batch_size": "batch_size", "lr": "lr",
    "max_length": "max_length", "val_fraction": "val_fraction", "seed": "seed",
    "device": "device", "pooling": "pooling", "max_steps": "max_steps",
    "positional_encoding": "positional_encoding", "recipe": "recipe",
    "truncation": "truncation", "patience": "patience", "label_smoothing": "label_smoothing",
}  # fmt: skip


def team_recorder(models_root: Path) -> ModelRecorder | None:
    """The trail's recorder when `models_root` is the team's models folder (a save there is
    a change every session sees), after finishing what a killed process left; None for the
    operator's own folders."""
    from core.access import OPERATOR
    from core.paths import models_dir
    from core.review.library import finish_interrupted_changes, model_recorder
    from core.review.store import Store

    if models_root.resolve() != models_dir().resolve():
        return None
    store = Store.open()
    finish_interrupted_changes(store, models_root=models_root)
    return model_recorder(store, actor=OPERATOR)


def _cmd_train(args: argparse.Namespace) -> None:
    from transformers import set_seed

    from core.access import OPERATOR
    from core.data.dataset import split_dataset
    from core.data.validation import load_dataset
    from core.models.card import model_name_free
    from core.models.device import configure_cpu_threads
    from core.models.training_job import save_under_free_name
    from core.models.transformer.config import TrainConfig
    from core.models.transformer.training import train_models

    # --out is the operator's own path: its parent may be any folder they can write to; its
    # last part is the model name, checked like a name typed in the app (one safe segment,
    # not a symbolic link), before hours of training rather than after.
    out = Path(args.out)
    if not model_name_free(out.parent, out.name):
        raise CommandError(f"{out} already exists; choose another --out or delete it first")
    record = team_recorder(out.parent)  # before hours of training: a read-only trail refuses
    options = {
        field: getattr(args, dest)
        for dest, field in _TRAIN_OPTIONS.items()
        if getattr(args, dest) is not None
    }
    if "positional_encoding" in options:
        options["positional_encoding"] = options["positional_encoding"] == "on"
    config = TrainConfig(**options)
    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    train, val = split_dataset(dataset, val_fraction=config.val_fraction, seed=config.seed)
    configure_cpu_threads()  # once, in the main thread: core's jobs never change thread counts
    # Process-wide generators too (Python, numpy, torch), for anything outside the run's own
    # seeded generators; only here, in the command's main thread, never inside a server job.
    set_seed(config.seed)
    with progress_bar("train", unit="step") as bar:
        result = train_models(train, val, config, on_progress=train_progress(bar))
    saved = save_under_free_name(  # as out.name-2, ... if taken while training; said below
        result, out.parent, out.name, actor=OPERATOR, data_fingerprint=dataset.fingerprint,
        record=record,
    )  # fmt: skip
    folder = saved.folder
    document = {
        "transformer": result.neural_report.to_json(),
        "bow": result.bow_report.to_json(),
        "decision": result.decision_report.to_json(),
        "blend": result.blend.to_json(),
        "recipe": result.config.recipe,
        "recipe_choice": result.recipe_choice,  # --recipe auto: what the data chose and why
        "review": None if result.review is None else result.review.to_json(),
        "model_dir": str(folder),
        "train_seconds": round(result.train_seconds, 3),
        "device": result.device,
        "best_epoch": result.best_epoch,
        "rows": {"train": len(train), "val": len(val)},
        "renamed_from": saved.renamed_from,  # the --out name, when it was taken meanwhile
    }
    if saved.rename_note:
        print(f"note: {saved.rename_note}", file=sys.stderr)
    if result.recipe_choice is not None:
        print(f"recipe: {result.recipe_choice['reason']}", file=sys.stderr)
    if result.neural_twin_report is not None:
        document["twin"] = {
            "transformer": result.neural_twin_report.to_json(),
            "bow": result.bow_twin_report.to_json(),
            "decision": result.decision_twin_report.to_json(),
        }
    if args.json:
        emit_json(document)
    else:
        _print_scores(document, f"saved {folder}")


def _print_scores(document: dict, headline: str) -> None:
    from core.models.blend import Blend

    print(headline)
    for name in ("transformer", "bow", "decision"):
        scores = document[name]
        print(f"  {name:12s} accuracy {scores['accuracy']:.4f}  macro-F1 {scores['macro_f1']:.4f}")
    print(f"  decision: {Blend.from_card(document).describe()}")
    for name, scores in document.get("twin", {}).items():
        print(f"  twin slice {name:12s} accuracy {scores['accuracy']:.4f}")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train the neural model and the bag of words; save both")
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    p.add_argument(
        "--out", required=True,
        help="model folder to create, e.g. models/NAME; NAME: letters, digits, '_', '-', '.'",
    )  # fmt: skip
    p.add_argument(
        "--backbone",
        help="minilm (default), tiny (transformer from scratch), lstm (bidirectional LSTM from "
        "scratch), or a local folder / HF model id",
    )  # fmt: skip
    p.add_argument(
        "--recipe", choices=("auto", "full", "quick"), default="auto",
        help="auto (default): the data choose, and the card says why; full: fine-tune every "
        "weight; quick: frozen pretrained encoder, embeddings once, a fitted linear head "
        "(about a minute on a CPU)",
    )  # fmt: skip
    p.add_argument("--epochs", type=int, help="default: the backbone's own (TrainConfig)")
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate; default: the backbone's own")
    p.add_argument("--max-length", type=int, help="word pieces kept per text")
    p.add_argument("--val-fraction", type=float, help="share held out for validation")
    p.add_argument("--seed", type=int)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"))
    p.add_argument(
        "--pooling", choices=("mean", "cls", "last"),
        help="head over mean of tokens or [CLS]; the LSTM: mean or last (its final states)",
    )  # fmt: skip
    p.add_argument("--max-steps", type=int, help="stop after this many steps (quick runs)")
    p.add_argument("--patience", type=int, help="epochs without a better validation macro-F1 "
                   "before stopping; default: the backbone's own")  # fmt: skip
    p.add_argument("--label-smoothing", type=float, help="share of each target spread over the "
                   "other desks in the loss, 0 to 0.5 (default 0)")  # fmt: skip
    p.add_argument(
        "--truncation", choices=("head", "head_tail"),
        help="how a text longer than --max-length is cut: its start (default), or its start "
        "and end (Hugging Face backbones only)",
    )  # fmt: skip
    p.add_argument(
        "--positional-encoding", choices=("on", "off"),
        help="tiny backbone: sinusoidal positions on (default) or off (order-blind)",
    )  # fmt: skip
    add_column_options(p, label=True)
    add_json_option(p, "print the scores as JSON on stdout")
    p.set_defaults(handler=_cmd_train)


def _cmd_evaluate(args: argparse.Namespace) -> None:
    from core.data.validation import load_dataset
    from core.metrics import evaluate_proba

    loaded = load_model_from_args(args.model, args)
    from core.models.classifier import predict_in_batches

    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    texts, labels = list(dataset.texts), list(dataset.labels)
    with progress_bar("evaluate", total=len(texts), unit="text") as bar:
        pred_probs = predict_in_batches(loaded.scorer, texts, on_rows=_advance(bar))
    bow_probs = loaded.bow.predict_proba(texts)
    frozen_probs = loaded.frozen_probs(texts)
    classes = loaded.scorer.classes_
    decision_probs = loaded.blend.combine(pred_probs, bow_probs, frozen_probs)
    document = {
        "transformer": evaluate_proba(labels, pred_probs, classes),
        "bow": evaluate_proba(labels, bow_probs, loaded.bow.classes_),
        "decision": evaluate_proba(labels, decision_probs, classes),
    }
    if frozen_probs is not None:
        document["frozen_encoder"] = evaluate_proba(labels, frozen_probs, classes)
    document = {name: report.to_json() for name, report in document.items()}
    document.update(model_dir=str(loaded.path), rows=len(dataset), blend=loaded.blend.to_json())
    if args.json:
        emit_json(document)
    else:
        _print_scores(document, f"{args.file}: {len(dataset)} rows")


def _advance(bar):
    """An on_rows callback moving a tqdm bar to `done`."""
    return lambda done: bar.update(done - bar.n)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a saved model pair on a labelled file")
    add_model_option(p)
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    add_column_options(p, label=True)
    add_runtime_options(p)
    add_json_option(p, "print the scores as JSON on stdout")
    p.set_defaults(handler=_cmd_evaluate)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `train` and `evaluate`."""
    _add_train(sub)
    _add_evaluate(sub)
