"""What the commands share: the user-error type, --json printing, the options several commands
take (columns, --model, --device/--precision, --json), --model resolution and progress bars."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.errors import UserError


class CommandError(UserError):
    """Bad input found by a command itself; its message is the user-facing line."""


def emit_json(document: dict) -> None:
    """`--json`: the one JSON document a command prints on stdout."""
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def add_column_options(p: argparse.ArgumentParser, *, label: bool) -> None:
    p.add_argument("--text-col", help="column holding the complaint text (default: detected)")
    if label:
        p.add_argument("--label-col", help="column holding the desk label (default: detected)")


MODEL_HELP = (
    "a saved model: its folder, its name in the models folder ($GRIEVANCE_LENS_MODELS_DIR), or "
    "`live` (the model an admin promoted; a folder named live is given as ./live)"
)
LIVE = "live"  # --model live: the team's live model (core.review.live)


def add_model_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=MODEL_HELP)


def model_dir_of(value: str) -> Path:
    """The folder a --model value names: `live`, a path that exists, or a saved model's name in
    the models folder; any other path is returned as typed (its checks say what is wrong)."""
    from core.models.card import CARD_NAME, NAME_PATTERN, model_folder
    from core.paths import models_dir

    if value == LIVE:
        return live_model_dir()
    path = Path(value)
    if path.exists() or not NAME_PATTERN.fullmatch(value):
        return path
    if (models_dir() / value / CARD_NAME).is_file():
        return model_folder(models_dir(), value)  # refuses a symbolic link out of the folder
    raise CommandError(
        f"--model {value}: no such folder and no saved model of that name in {models_dir()}; "
        "give a model folder, a saved model's name, or live"
    )


def live_model_dir() -> Path:
    """The live model's folder (the store at $GRIEVANCE_LENS_DATA_DIR/lens.db); no store file
    means no promotion yet, and is not created just to be asked."""
    from core.paths import models_dir
    from core.review.live import NO_LIVE_MODEL, live_model_folder
    from core.review.store import Store, default_db_path

    path = default_db_path()
    if not path.is_file():
        raise CommandError(NO_LIVE_MODEL)
    with Store.open(path) as store:
        return live_model_folder(store, models_dir())


def add_json_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=what)


def add_runtime_options(p: argparse.ArgumentParser, *, routes: bool = False) -> None:
    """--device and --precision: the runtime the model runs on (core.models.device.Runtime);
    `routes`: a command that routes with a saved model, which may take its int8 serving graph
    (core.models.serving)."""
    p.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto",
        help="where the model runs: auto (default; CUDA when available), cpu or cuda",
    )  # fmt: skip
    if routes:
        p.add_argument(
            "--precision", choices=("auto", "fp32", "bf16", "int8"), default="auto",
            help="auto (default): $GRIEVANCE_LENS_PRECISION when set; else, on a CPU, the "
            "model's int8 serving graph where it has one, or its fp32 graph; bf16 runs torch",
        )  # fmt: skip
        return
    p.add_argument(
        "--precision", choices=("auto", "fp32", "bf16"), default="auto",
        help="auto (default): $GRIEVANCE_LENS_PRECISION when set, else bf16 on CUDA or on a CPU "
        "with bf16 units, else fp32",
    )  # fmt: skip


def check_runtime(args: argparse.Namespace) -> None:
    """Refuse a --device or --precision this machine cannot honour before any work starts
    (`cuda` without a CUDA GPU, a bad GRIEVANCE_LENS_PRECISION); torch is asked only about
    CUDA, so a run the serving graph routes never imports it."""
    from core.models.hardware import check_device_name, operator_precision

    check_device_name(args.device)
    operator_precision("auto")  # the operator's setting, checked even when --precision is set
    if args.device == "cuda":
        from core.models.device import Runtime

        Runtime.resolve(args.device, "auto")


def load_model_card(model: str) -> Path:
    """The folder of --model `model` (see `model_dir_of`), refused without torch when it is not a
    model, holds pickle-based files or ships code, so a wrong path fails at once instead of
    after seconds of imports."""
    from core.models.card import check_loadable, read_card

    folder = model_dir_of(model)
    read_card(folder)
    check_loadable(folder)
    return folder


def load_model_from_args(model: str, args: argparse.Namespace):
    """The saved model --model `model` names (the operator's choice), checked first by
    `load_model_card`, on the runtime of `args.device` and `args.precision`."""
    folder = load_model_card(model)
    from core.models.registry import load_model

    return load_model(folder, device=args.device, precision=args.precision)


def chosen_review_threshold(args: argparse.Namespace) -> float:
    """--review-threshold, or the default; refused outside 0..1."""
    from core.models.classifier import DEFAULT_REVIEW_THRESHOLD

    threshold = args.review_threshold
    threshold = DEFAULT_REVIEW_THRESHOLD if threshold is None else threshold
    if not 0.0 <= threshold <= 1.0:
        raise CommandError(f"--review-threshold must lie in 0..1, got {threshold}")
    return threshold


def progress_bar(description: str, **options):
    from tqdm import tqdm

    return tqdm(desc=description, file=sys.stderr, dynamic_ncols=True, **options)


def train_progress(bar):
    def update(progress) -> None:
        bar.total = progress.total
        bar.update(progress.done - bar.n)
        metrics = progress.detail  # core.models.transformer.loop.StepMetrics
        postfix = {"epoch": metrics.epoch, "loss": f"{metrics.loss:.3f}"}
        if progress.phase != "train":  # the quick recipe: rows embedded, then the head
            postfix = {"phase": progress.phase}
        if metrics.val_accuracy is not None:
            postfix["val_acc"] = f"{metrics.val_accuracy:.3f}"
        bar.set_postfix(postfix, refresh=False)

    return update
