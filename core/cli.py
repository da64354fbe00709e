"""The command line: `python -m core <command> ...` (the contract is in DESIGN.md).

Every command exits 0 on success; on bad input (a `UserError`) it prints one line
`error: <what to fix>` on stderr and exits 2, never a traceback. Anything else is a bug: one line
saying so, the traceback logged to stderr, exit 1. `--json` prints one JSON document on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from core.errors import UserError

log = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1
EXIT_BROKEN_PIPE = 128 + 13  # SIGPIPE: what a shell reports for `yes | head`
# An argument path that is missing, a folder, or not readable: the user's to fix.
_PATH_ERRORS = (FileNotFoundError, IsADirectoryError, PermissionError)


class CommandError(UserError):
    """Bad input found by a command itself; its message is the user-facing line."""


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line error format."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {message} (see `{self.prog} --help`)\n")


def _emit_json(document: dict) -> None:
    json.dump(document, sys.stdout, ensure_ascii=False, indent=2, default=str)
    sys.stdout.write("\n")


def _cmd_validate(args: argparse.Namespace) -> None:
    from core.data.validation import load_dataset

    _, report = load_dataset(
        Path(args.file),
        text_col=args.text_col,
        label_col=args.label_col,
        max_tokens=args.max_tokens,
    )
    if args.json:
        _emit_json(report.to_json())
        return
    print(f"{args.file}: text column '{report.text_col}', label column '{report.label_col}'")
    print(f"rows read {report.rows_read}, kept {report.rows_kept}, dropped {len(report.dropped)}")
    for label, count in report.labels.items():
        print(f"  {count:>7}  {label}")
    print(f"duplicate texts {report.duplicates}, texts with conflicting labels {report.conflicts}")
    for dropped in report.dropped[:20]:
        print(f"  dropped row {dropped.row}: {dropped.reason}")
    if len(report.dropped) > 20:
        print(f"  ... and {len(report.dropped) - 20} more dropped rows (see --json)")
    for warning in report.warnings:
        print(f"warning: {warning}")


def _cmd_demo_data(args: argparse.Namespace) -> None:
    from core.data.demo import DemoConfig, write_demo_data

    given = {"rows": args.rows, "seed": args.seed}
    config = DemoConfig(**{k: v for k, v in given.items() if v is not None})
    path = write_demo_data(Path(args.out), config)
    print(f"wrote {config.rows} demo complaints to {path}", file=sys.stderr)


def _add_column_options(p: argparse.ArgumentParser, *, label: bool) -> None:
    p.add_argument("--text-col", help="column holding the complaint text (default: detected)")
    if label:
        p.add_argument("--label-col", help="column holding the desk label (default: detected)")


MODEL_HELP = (
    "a saved model: its folder, its name in the models folder ($GRIEVANCE_LENS_MODELS_DIR), or "
    "`live` (the model an admin promoted; a folder named live is given as ./live)"
)
LIVE = "live"  # --model live: the team's live model (core.review.live)


def _add_model_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help=MODEL_HELP)


def _model_dir(value: str) -> Path:
    """The folder a --model value names: `live`, a path that exists, or a saved model's name in
    the models folder; any other path is returned as typed (its checks say what is wrong)."""
    from core.models.card import CARD_NAME, NAME_PATTERN, model_folder
    from core.paths import models_dir

    if value == LIVE:
        return _live_model_dir()
    path = Path(value)
    if path.exists() or not NAME_PATTERN.fullmatch(value):
        return path
    if (models_dir() / value / CARD_NAME).is_file():
        return model_folder(models_dir(), value)  # refuses a symbolic link out of the folder
    raise CommandError(
        f"--model {value}: no such folder and no saved model of that name in {models_dir()}; "
        "give a model folder, a saved model's name, or live"
    )


def _live_model_dir() -> Path:
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


def _add_json_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--json", action="store_true", help=what)


def _add_runtime_options(p: argparse.ArgumentParser) -> None:
    """--device and --precision: the runtime the model runs on (core.models.device.Runtime)."""
    p.add_argument(
        "--device", choices=("auto", "cpu", "cuda"), default="auto",
        help="where the model runs: auto (default; CUDA when available), cpu or cuda",
    )  # fmt: skip
    p.add_argument(
        "--precision", choices=("auto", "fp32", "bf16"), default="auto",
        help="auto (default): $GRIEVANCE_LENS_PRECISION when set, else bf16 on CUDA or on a CPU "
        "with bf16 units, else fp32",
    )  # fmt: skip


def _check_runtime(args: argparse.Namespace) -> None:
    """Refuse a --device or --precision this machine cannot honour before any work starts
    (`cuda` without a CUDA GPU, a bad GRIEVANCE_LENS_PRECISION)."""
    from core.models.device import Runtime

    Runtime.resolve(args.device, args.precision)


def _add_validate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="check a labelled complaint spreadsheet")
    p.add_argument("file", help="CSV, TSV, XLSX or Parquet file")
    _add_column_options(p, label=True)
    p.add_argument("--max-tokens", type=int, default=256, help="model length to warn about")
    _add_json_option(p, "print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_validate)


def _add_demo_data(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo-data", help="write the built-in demo grievance data set")
    p.add_argument("out", help="output file, .csv or .xlsx")
    # Defaults live in core.data.demo.DemoConfig, not imported here: it brings pandas and
    # openpyxl into every command's start (tests/test_classify_imports.py checks the figures).
    p.add_argument("--rows", type=int, help="number of complaints (default 3000)")
    p.add_argument("--seed", type=int, help="random seed (default 7)")
    p.set_defaults(handler=_cmd_demo_data)


# ----------------------------------------------------------- train / evaluate / classify
# Heavy imports (torch, transformers) happen inside the handlers so `validate` stays fast.

_TRAIN_OPTIONS = {  # CLI flag dest -> TrainConfig field
    "backbone": "backbone", "epochs": "epochs", "batch_size": "batch_size", "lr": "lr",
    "max_length": "max_length", "val_fraction": "val_fraction", "seed": "seed",
    "device": "device", "pooling": "pooling", "max_steps": "max_steps",
    "positional_encoding": "positional_encoding", "recipe": "recipe",
    "truncation": "truncation", "patience": "patience", "label_smoothing": "label_smoothing",
}  # fmt: skip


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
    with _progress_bar("train", unit="step") as bar:
        result = train_models(train, val, config, on_progress=_train_progress(bar))
    saved = save_under_free_name(  # as out.name-2, ... if taken while training; said below
        result, out.parent, out.name, actor=OPERATOR, data_fingerprint=dataset.fingerprint
    )
    folder = saved.folder
    document = {
        "transformer": result.transformer_report.to_json(),
        "bow": result.baseline_report.to_json(),
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
    if result.transformer_twin_report is not None:
        document["twin"] = {
            "transformer": result.transformer_twin_report.to_json(),
            "bow": result.baseline_twin_report.to_json(),
            "decision": result.decision_twin_report.to_json(),
        }
    if args.json:
        _emit_json(document)
    else:
        _print_scores(document, f"saved {folder}")


def _progress_bar(description: str, **options):
    from tqdm import tqdm

    return tqdm(desc=description, file=sys.stderr, dynamic_ncols=True, **options)


def _train_progress(bar):
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


def _print_scores(document: dict, headline: str) -> None:
    from core.models.blend import Blend

    print(headline)
    for name in ("transformer", "bow", "decision"):
        scores = document[name]
        print(f"  {name:12s} accuracy {scores['accuracy']:.4f}  macro-F1 {scores['macro_f1']:.4f}")
    print(f"  decision: {Blend.from_card(document).describe()}")
    for name, scores in document.get("twin", {}).items():
        print(f"  twin slice {name:12s} accuracy {scores['accuracy']:.4f}")


def _cmd_evaluate(args: argparse.Namespace) -> None:
    from core.data.validation import load_dataset
    from core.metrics import evaluate_proba

    loaded = _load_model(args.model, args)
    from core.models.classifier import predict_in_batches

    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    texts, labels = list(dataset.texts), list(dataset.labels)
    with _progress_bar("evaluate", total=len(texts), unit="text") as bar:
        pred_probs = predict_in_batches(loaded.transformer, texts, on_rows=_advance(bar))
    bow_probs = loaded.baseline.predict_proba(texts)
    classes = loaded.transformer.classes_
    document = {
        "transformer": evaluate_proba(labels, pred_probs, classes),
        "bow": evaluate_proba(labels, bow_probs, loaded.baseline.classes_),
        "decision": evaluate_proba(labels, loaded.blend.combine(pred_probs, bow_probs), classes),
    }
    document = {name: report.to_json() for name, report in document.items()}
    document.update(model_dir=str(loaded.path), rows=len(dataset), blend=loaded.blend.to_json())
    if args.json:
        _emit_json(document)
    else:
        _print_scores(document, f"{args.file}: {len(dataset)} rows")


def _load_model_card(model: str) -> Path:
    """The folder of --model `model` (see `_model_dir`), refused without torch when it is not a
    model, holds pickle-based files or ships code, so a wrong path fails at once instead of
    after seconds of imports."""
    from core.models.card import check_loadable, read_card

    folder = _model_dir(model)
    read_card(folder)
    check_loadable(folder)
    return folder


def _load_model(model: str, args: argparse.Namespace):
    """The saved model --model `model` names (the operator's choice), checked first by
    `_load_model_card`, on the runtime of `args.device` and `args.precision`."""
    folder = _load_model_card(model)
    from core.models.registry import load_model

    return load_model(folder, device=args.device, precision=args.precision)


def _advance(bar):
    """An on_rows callback moving a tqdm bar to `done`."""
    return lambda done: bar.update(done - bar.n)


def _review_threshold(args: argparse.Namespace) -> float:
    """--review-threshold, or the default; refused outside 0..1."""
    from core.models.classifier import DEFAULT_REVIEW_THRESHOLD

    threshold = args.review_threshold
    threshold = DEFAULT_REVIEW_THRESHOLD if threshold is None else threshold
    if not 0.0 <= threshold <= 1.0:
        raise CommandError(f"--review-threshold must lie in 0..1, got {threshold}")
    return threshold


def _cmd_classify(args: argparse.Namespace) -> None:
    # Without --review-threshold each model flags by its own policy (saved in its card).
    threshold = None if args.review_threshold is None else _review_threshold(args)
    for option in ("workers", "batch_size", "cpus_per_worker"):
        if (getattr(args, option) or 1) < 1:
            raise CommandError(f"--{option.replace('_', '-')} must be 1 or more")
    model_dir = _load_model_card(args.model)  # a wrong folder fails before Ray or torch start
    if args.engine == "local":  # on Ray, the actors' hardware decides (core.scale)
        _check_runtime(args)
    from core.data.limits import IntakeLimits
    from core.scale import ScaleConfig, score_archive

    source = Path(args.input)
    config = ScaleConfig(
        model_dir=model_dir, input=source,
        out=Path(args.out) if args.out else _default_out(source),
        text_col=args.text_col, review_threshold=threshold, engine=args.engine,
        address=args.address, workers=args.workers, batch_size=args.batch_size,
        gpus_per_worker=args.gpus_per_worker, cpus_per_worker=args.cpus_per_worker,
        precision=args.precision, device=args.device,
        limits=IntakeLimits.from_env(),  # GRIEVANCE_LENS_MAX_FILE_MB and _MAX_ROWS, as the app
    )  # fmt: skip
    with _progress_bar("classify", unit="text") as bar:
        result = score_archive(config, on_rows=bar.update)
    if args.json:
        _emit_json({
            "rows": result.rows, "out": str(result.out), "text_col": result.text_col,
            "parts": result.parts, "engine": args.engine, "seconds": round(result.seconds, 3),
        })  # fmt: skip
    else:
        print(
            f"classified {result.rows} rows of {result.parts} part(s) from column "
            f"'{result.text_col}' into {result.out} ({args.engine}, {result.seconds:.1f} s)"
        )


def _default_out(path: Path) -> Path:
    """INPUT_classified.csv beside a file; INPUT_classified/ (Parquet parts) beside a folder."""
    if path.is_dir():
        return path.with_name(f"{path.name}_classified")
    return path.with_name(f"{path.stem}_classified.csv")


def _add_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="fine-tune the transformer and the baseline; save both")
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
    _add_column_options(p, label=True)
    _add_json_option(p, "print the scores as JSON on stdout")
    p.set_defaults(handler=_cmd_train)


def _add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="score a saved model pair on a labelled file")
    _add_model_option(p)
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    _add_column_options(p, label=True)
    _add_runtime_options(p)
    _add_json_option(p, "print the scores as JSON on stdout")
    p.set_defaults(handler=_cmd_evaluate)


def _add_classify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "classify", help="route every complaint of a file or a folder of parts; locally or on Ray"
    )
    _add_model_option(p)
    p.add_argument(
        "input", help="CSV, TSV, XLSX or Parquet file, or a folder of .csv or .parquet parts"
    )
    p.add_argument(
        "--out",
        help="output .csv or .xlsx, or a new folder for one Parquet part per input part "
        "(default: INPUT_classified.csv, or INPUT_classified/ for a folder)",
    )
    p.add_argument(
        "--engine", choices=("local", "ray"), default="local",
        help="local: this process (default); ray: a Ray Data actor pool",
    )  # fmt: skip
    p.add_argument("--address", help="Ray cluster address (default: start Ray on this machine)")
    p.add_argument("--workers", type=int, default=1, help="Ray actors, one model copy each")
    p.add_argument("--batch-size", type=int, default=256, help="Ray: texts per actor call")
    p.add_argument(
        "--gpus-per-worker", type=float, default=0.0, help="GPUs each Ray actor asks for"
    )
    p.add_argument(
        "--cpus-per-worker", type=int, help="CPUs (threads) per Ray actor (default: an even share)"
    )
    _add_runtime_options(p)
    _add_column_options(p, label=False)
    p.add_argument(
        "--review-threshold", type=float,
        help="flag needs_review below this top probability (default: the model's own, chosen "
        "on its validation rows and saved in its card)",
    )  # fmt: skip
    _add_json_option(p, "print rows and out path as JSON")
    p.set_defaults(handler=_cmd_classify)


# ----------------------------------------------------------- audit


def _cmd_audit(args: argparse.Namespace) -> None:
    from core.analysis.audit import AuditConfig, check_auditable, run_audit
    from core.data.validation import load_dataset

    config = AuditConfig(folds=args.folds, seed=args.seed)  # bad --folds fails before reading
    _check_runtime(args)
    model = args.model if args.model is not None else "bow"
    train_config = _quick_settings(args) if model == "quick" else None
    folder = None if model in ("bow", "quick") else _model_dir(model)  # before the file is read
    if args.backbone is not None and train_config is None:
        raise CommandError("--backbone is for --model quick; a saved model's folder names its own")
    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    check_auditable(dataset, config.folds)  # before a progress bar starts drawing on stderr
    if model == "bow":
        with _progress_bar("audit (bag of words)", unit="fold", total=config.folds) as bar:
            result = run_audit(dataset, config, on_progress=lambda p: bar.update(p.done - bar.n))
        document = result.to_json()
    elif train_config is not None:
        with _operator_precision(args.precision):
            result, document = _quick_audit(dataset, config, train_config)
    else:
        with _operator_precision(args.precision):
            result, document = _transformer_audit(dataset, config, folder, args.device)
    if args.json:
        _emit_json(document)
        return
    print(f"{len(result.issues)} suspected label issues ({result.model}, {result.folds} folds)")
    for issue in result.issues[: args.show]:
        text = " ".join(issue.text.split())
        print(
            f"  row {issue.row}: {issue.given_label} -> {issue.suggested_label} "
            f"(quality {issue.quality:.3f}) {issue.reason}\n      {text[:100]}"
        )
    if len(result.issues) > args.show:
        print(f"  ... and {len(result.issues) - args.show} more (see --json)")


def _quick_settings(args: argparse.Namespace):
    """The TrainConfig of `--model quick` (checked before the file is read)."""
    from core.analysis.audit_quick import quick_train_config
    from core.models.transformer.config import MINILM

    config = quick_train_config(args.backbone if args.backbone is not None else MINILM)
    return dataclasses.replace(config, device=args.device)


@contextlib.contextmanager
def _operator_precision(precision: str) -> Iterator[None]:
    """`--precision` as GRIEVANCE_LENS_PRECISION while an audit runs, then as before: its fold
    models are built deep inside training, which resolves "auto" from it (a command line owns
    its process; the app never sets it)."""
    from core.models.device import PRECISION_ENV

    before = os.environ.get(PRECISION_ENV)
    if precision != "auto":
        os.environ[PRECISION_ENV] = precision
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(PRECISION_ENV, None)
        else:
            os.environ[PRECISION_ENV] = before


def _quick_audit(dataset, config, train_config):
    """Embed every text once with the frozen encoder, then fit a head per fold; tqdm bars of
    texts embedded, then of folds, on stderr."""
    from core.analysis.audit_quick import run_quick_audit
    from core.models.transformer.config import backbone_label

    name = f"audit (quick, {backbone_label(train_config.backbone)})"
    with contextlib.ExitStack() as stack:
        bars: dict[str, object] = {}

        def bar(kind: str, **options):
            if kind not in bars:  # opened at the first report: a load error prints alone
                bars[kind] = stack.enter_context(_progress_bar(f"{name} {kind}", **options))
            return bars[kind]

        def on_embed(progress) -> None:
            embedded = bar("embedding", unit="text", total=progress.total)
            embedded.update(progress.done - embedded.n)

        def on_fold(progress) -> None:
            folds = bar("folds", unit="fold", total=progress.total)
            folds.update(progress.done - folds.n)

        result = run_quick_audit(
            dataset, config, train_config, on_embed=on_embed, on_progress=on_fold
        )
    document = {**result.to_json(), "backbone": backbone_label(train_config.backbone)}
    return result, document


def _transformer_audit(dataset, config, folder: Path, device: str):
    """Fine-tune the saved model's TrainConfig on each fold (on `device`), a tqdm bar of steps
    on stderr; a quick model is audited the quick way over its own backbone."""
    from core.analysis.audit import run_audit
    from core.analysis.audit_transformer import model_audit_settings, transformer_fit
    from core.models.card import read_card
    from core.models.transformer.config import QUICK

    config, train_config = model_audit_settings(read_card(folder), config)
    train_config = dataclasses.replace(train_config, device=device)
    if train_config.recipe == QUICK:  # a quick model: its encoder embeds once, heads per fold
        result, document = _quick_audit(dataset, config, train_config)
        return result, {**document, "model_dir": str(folder)}
    folds_done = [0]
    # The bar opens at the first step, so a backbone that fails to load ends with the error
    # line alone, and a fast run still shows its progress.
    with contextlib.ExitStack() as stack:
        bars = []

        def on_step(progress) -> None:
            if not bars:
                bars.append(stack.enter_context(
                    _progress_bar(f"audit ({train_config.backbone})", unit="step")
                ))  # fmt: skip
            bar = bars[0]
            bar.total = progress.total * config.folds
            bar.update(folds_done[0] * progress.total + progress.done - bar.n)
            bar.set_postfix({"fold": f"{folds_done[0] + 1}/{config.folds}"}, refresh=False)

        def on_fold(progress) -> None:
            folds_done[0] = int(progress.done)

        fit = transformer_fit(train_config, on_progress=on_step)
        result = run_audit(dataset, config, fit=fit, on_progress=on_fold)
    document = {**result.to_json(), "model_dir": str(folder), "backbone": train_config.backbone}
    return result, document


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="find rows whose label looks wrong (confident learning)")
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    p.add_argument(
        "--model",
        help="the model that predicts each row without having seen it: bow (default; the "
        "bag-of-words baseline, seconds), quick (a pretrained encoder's frozen embeddings, once, "
        "and a linear head per fold; about a minute for 3000 rows on a CPU), or a saved model "
        "folder, name or live (fine-tunes its training settings on each fold; hours without a "
        "GPU). A folder named bow, quick or live is given as ./bow, ./quick or ./live",
    )
    p.add_argument(
        "--backbone",
        help="with --model quick: the frozen encoder, minilm (default, bundled) or a local "
        "folder / cached Hugging Face id",
    )
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the fold assignment")
    _add_column_options(p, label=True)
    p.add_argument("--show", type=int, default=20, help="issues to print without --json")
    _add_runtime_options(p)  # a model folder or quick: where its fold models train and predict
    _add_json_option(p, "print the issues as JSON on stdout")
    p.set_defaults(handler=_cmd_audit)


# ----------------------------------------------------------- explain / probe


def _complaint(text: str) -> str:
    """The TEXT argument, or standard input when it is "-"."""
    return sys.stdin.read() if text == "-" else text


def _cmd_explain(args: argparse.Namespace) -> None:
    from core.analysis.explain import ExplainConfig
    from core.analysis.lstm_explain import explain_any, explanation_method

    options = {"n_steps": args.steps, "max_steps": args.max_steps}
    options = {name: value for name, value in options.items() if value is not None}
    if args.max_delta is not None:
        options["max_relative_delta"] = args.max_delta or None  # 0: one pass
    config = ExplainConfig(target=args.target, **options)  # bad options fail first
    model = _load_model(args.model, args)
    expl = explain_any(model.transformer, model.baseline, _complaint(args.text), config)
    decision = model.blend.decide(expl.transformer, expl.bow)
    if args.json:
        _emit_json(
            {
                **expl.to_json(),
                "method": explanation_method(model.transformer),  # an LSTM: gradient x input
                "decision": {**decision.to_json(), "decided_by": model.blend.decided_by},
                "runtime": model.transformer.runtime.to_json(),
            }
        )
        return
    print(f"decision: {decision.label} ({model.blend.describe()})")
    print(f"transformer: {expl.transformer.label}   bag of words: {expl.bow.label}")
    relative = "n/a" if expl.relative_delta is None else f"{expl.relative_delta:.1%}"
    print(f"scores for {expl.target} (convergence delta {expl.delta:+.4f}, {relative} of gap)")
    print(f"  {'word':<20} {'transformer':>12} {'bag of words':>13}")
    for word, t, b in zip(expl.words, expl.transformer_scores, expl.bow_scores, strict=True):
        print(f"  {word.text[:20]:<20} {t:>+12.4f} {b:>+13.4f}")


def _cmd_probe(args: argparse.Namespace) -> None:
    from core.analysis.perturbations import ProbeConfig
    from core.analysis.probe_compare import run_probes

    config = ProbeConfig(
        n_shuffles=args.shuffles, invariance=not args.no_invariance, seed=args.seed
    )
    model = _load_model(args.model, args)
    result = run_probes(model.transformer, model.baseline, _complaint(args.text), config)
    if args.json:
        _emit_json(result.to_json())
        return
    print(f"original: transformer {result.transformer.label}, bag of words {result.bow.label}")
    for o in result.outcomes:
        bag = "same bag" if o.perturbation.bag_unchanged else "new bag "
        flips = "".join(
            f" [{name} flips]"
            for name, flipped in (("transformer", o.transformer_flipped), ("bow", o.bow_flipped))
            if flipped
        )
        print(f"  {o.perturbation.kind:<15} {bag} {o.transformer.label} / {o.bow.label}{flips}")
        print(f"      {' '.join(o.perturbation.text.split())[:100]}")


def _add_explain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explain", help="why both models routed one complaint, word by word")
    _add_model_option(p)
    p.add_argument("text", help='the complaint text ("-" reads it from standard input)')
    p.add_argument("--target", help="desk to explain (default: the transformer's prediction)")
    # Defaults live in core.analysis.explain.ExplainConfig (not imported here: it brings torch).
    p.add_argument("--steps", type=int, help="integration steps per path segment (default 4)")
    p.add_argument("--max-steps", type=int, help="integration steps at most (default 64)")
    p.add_argument(
        "--max-delta", type=float,
        help="add steps until |delta| <= this share of the logit gap (default 0.02; 0: one pass)",
    )  # fmt: skip
    _add_runtime_options(p)
    _add_json_option(p, "print the explanation as JSON")
    p.set_defaults(handler=_cmd_explain)


def _add_probe(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("probe", help="reorder one complaint's words and compare both models")
    _add_model_option(p)
    p.add_argument("text", help='the complaint text ("-" reads it from standard input)')
    p.add_argument("--shuffles", type=int, default=2, help="random word orders (default 2)")
    p.add_argument("--seed", type=int, default=0, help="seed of the shuffles and the typo")
    p.add_argument("--no-invariance", action="store_true", help="skip typo, please, punctuation")
    _add_runtime_options(p)
    _add_json_option(p, "print the probes as JSON")
    p.set_defaults(handler=_cmd_probe)


# ----------------------------------------------------------- verify-store

EXIT_BROKEN_CHAIN = 1  # the review store's hash chain is broken (an intact store exits 0)


def _cmd_verify_store(args: argparse.Namespace) -> int:
    """Recompute the review store's hash chains; exit 1 naming the first broken link, or the
    schema difference when a trigger or table was changed."""
    from core.review.schema import TamperedSchemaError
    from core.review.store import BrokenChainError, Store, default_db_path

    path = Path(args.db) if args.db is not None else default_db_path()
    if not path.is_file():
        raise CommandError(f"no review store at {path}; give its path with --db")
    try:
        with Store.open(path) as store:
            report = store.verify_chains()
    except BrokenChainError as exc:
        report = exc.report
    except TamperedSchemaError as exc:  # a trigger dropped or altered: tampered, like a chain
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BROKEN_CHAIN
    if args.json:
        _emit_json({"db": str(path), **report.to_json()})
    elif report.broken is None:
        print(f"{path}: intact")
        for head in report.heads:
            print(f"  {head.table:<17} {head.rows:>9} rows  head {head.head}")
    else:
        print(f"{path}: broken at {report.broken.describe()} (changed outside Grievance Lens)")
    return 0 if report.intact else EXIT_BROKEN_CHAIN


def _add_verify_store(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify-store", help="check the review store's hash chains (tamper check)")
    p.add_argument("--db", help="the review store (default: $GRIEVANCE_LENS_DATA_DIR/lens.db)")
    _add_json_option(p, "print the verdict, the first broken link and each chain's head as JSON")
    p.set_defaults(handler=_cmd_verify_store)


# ----------------------------------------------------------- promote


def _cmd_promote(args: argparse.Namespace) -> None:
    """Make a saved model the team's live model, as the operator; the trail records it."""
    from core.access import OPERATOR
    from core.paths import models_dir
    from core.review.live import format_since, promote_model
    from core.review.store import Store, default_db_path

    report = _read_report(Path(args.report)) if args.report is not None else None
    with Store.open(default_db_path()) as store:
        live = promote_model(
            store, models_dir(), args.name, reason=args.reason, actor=OPERATOR, report=report
        )
    if args.json:
        _emit_json(dataclasses.asdict(live))
        return
    before = f"; before it: {live.previous}" if live.previous else "; the first live model"
    print(
        f"{live.name} is the live model since {format_since(live.since)}, promoted by "
        f"{live.promoted_by}{before}"
    )
    print(f"reason: {live.reason}")


def _read_report(path: Path) -> dict:
    """The comparison report of `--report` (`compare --json` output), size checked before it
    is read."""
    from core.paths import read_json_object
    from core.review.live import MAX_REPORT_BYTES

    return read_json_object(
        path, max_bytes=MAX_REPORT_BYTES, what=str(path), missing=f"no report file {path}",
        fix="give the output of `python -m core compare --json`",
    )  # fmt: skip


def _add_promote(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "promote", help="make a saved model the team's live model (recorded in the trail)"
    )
    p.add_argument(
        "name", help="a saved model's name in the models folder; an earlier one rolls back"
    )
    p.add_argument("--reason", required=True, help="why, for the team's record (required)")
    p.add_argument(
        "--report", help="the comparison it is based on: a `python -m core compare --json` file"
    )
    _add_json_option(p, "print the promotion as JSON")
    p.set_defaults(handler=_cmd_promote)


def _cmd_compare(args: argparse.Namespace) -> None:
    """Two saved models on the rows of FILE that neither trained on (challenger against live)."""
    if len(args.model) != 2:
        raise CommandError(f"give --model twice (A, then B), got {len(args.model)}")
    threshold = _review_threshold(args)
    from core.analysis.compare import compare_models, render_text
    from core.data.validation import load_dataset

    a, b = (_load_model(model, args) for model in args.model)
    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    gold = _verdicts_since(str(a.card.get("created_at", ""))) if args.with_verdicts else None
    rows = len(dataset) + (0 if gold is None else len(gold))
    with _progress_bar("compare", total=2 * rows, unit="text") as bar:
        comparison = compare_models(
            a, b, dataset, gold=gold, threshold=threshold,
            on_progress=lambda p: bar.update(p.done - bar.n),
        )  # fmt: skip
    if args.json:
        _emit_json(comparison.to_json())
    else:
        print(render_text(comparison))


def _verdicts_since(since: str):
    """The triage verdicts given after `since` (A's training) in the review store, as gold
    rows; an empty data set when there is no store yet."""
    from core.review.gold import gold_rows
    from core.review.store import Store, default_db_path

    if not since:
        raise CommandError("model A's card has no created_at; --with-verdicts cannot date them")
    if not default_db_path().is_file():
        return None
    with Store.open(default_db_path(), read_only=True) as store:
        gold = gold_rows(store, since=since)
    return gold if len(gold) else None


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="score two saved models on the rows of a file that neither trained on"
    )
    p.add_argument(
        "--model", action="append", required=True,
        help=f"{MODEL_HELP}; give it twice: A (e.g. live), then B (e.g. the challenger)",
    )  # fmt: skip
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    _add_column_options(p, label=True)
    p.add_argument(
        "--review-threshold", type=float, default=None,
        help="confidence below which a complaint goes to people (the review load)",
    )  # fmt: skip
    p.add_argument(
        "--with-verdicts", action="store_true",
        help="also score the triage verdicts reviewers gave since A was trained (gold rows)",
    )  # fmt: skip
    _add_runtime_options(p)
    _add_json_option(p, "print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_compare)


# ------------------------------------------------- the closed loop: data sets and retraining


def _cmd_save_dataset(args: argparse.Namespace) -> None:
    """Save a labelled file on the server as a named data set, as the operator (trail event)."""
    from core.access import OPERATOR
    from core.data.saved import datasets_root
    from core.data.validation import load_dataset
    from core.review.library import save_and_record
    from core.review.store import Store, default_db_path

    dataset, report = load_dataset(
        Path(args.file), text_col=args.text_col, label_col=args.label_col
    )
    with Store.open(default_db_path()) as store:
        saved = save_and_record(
            store, datasets_root(), args.name, dataset, actor=OPERATOR,
            validation=report.to_json(),
        )  # fmt: skip
    if args.json:
        _emit_json(_dataset_json(saved))
    else:
        print(f"saved {saved.rows:,} rows as data set {saved.name} ({saved.fingerprint[:12]})")


def _dataset_json(saved) -> dict:
    return {
        "name": saved.name, "fingerprint": saved.fingerprint, "rows": saved.rows,
        "labels": saved.labels, "saved_by": saved.saved_by, "saved_at": saved.saved_at,
        "parent": saved.parent, "lineage": saved.lineage, "retired": saved.retired,
    }  # fmt: skip


def _cmd_datasets(args: argparse.Namespace) -> None:
    """The saved data sets, newest first."""
    from core.data.saved import datasets_root, list_datasets

    found = list_datasets(datasets_root(), include_retired=args.all)
    if args.json:
        _emit_json({"datasets": [_dataset_json(saved) for saved in found]})
        return
    for saved in found:
        parent = f", from {saved.parent}" if saved.parent else ""
        retired = " (retired)" if saved.retired else ""
        print(f"{saved.name}{retired}: {saved.rows:,} rows, saved by {saved.saved_by} "
              f"{saved.saved_at}{parent}")  # fmt: skip


def _cmd_retrain(args: argparse.Namespace) -> None:
    """Retrain from corrections, as the operator: the plan, then (unless --plan-only) the next
    version saved and the challenger trained here, with the live model's recipe and split."""
    from core.access import OPERATOR
    from core.data.saved import datasets_root
    from core.paths import models_dir
    from core.review.corrections import next_version_name, plan_corrections
    from core.review.store import Store, default_db_path

    with Store.open(default_db_path()) as store:
        plan = plan_corrections(store, datasets_root(), args.parent, actor=OPERATOR)
        if args.plan_only:
            _emit_json({"plan": plan.counts(), "by_reviewer": plan.by_reviewer,
                        "desks_before": plan.desks_before, "desks_after": plan.desks_after,
                        "already_built_as": plan.already_built_as})  # fmt: skip
            return
        name = args.name or next_version_name(datasets_root(), args.parent)
        document = _retrain_here(store, datasets_root(), models_dir(), name, args)
    if args.json:
        _emit_json(document)
    else:
        print(f"saved data set {document['dataset']} ({document['counts']}); challenger "
              f"{document['challenger']} trained in {document['train_seconds']:.0f} s; "
              f"compare it: python -m core compare --model live --model "
              f"{document['challenger']} FILE")  # fmt: skip


def _retrain_here(store, datasets_root: Path, models_root: Path, name: str, args) -> dict:
    from core.access import OPERATOR
    from core.models.device import configure_cpu_threads
    from core.models.training_job import train_and_save
    from core.tasks.retrain import prepare_retrain, record_retrain

    prepared = prepare_retrain(
        store, datasets_root, models_root, args.parent, new_name=name,
        challenger_name=args.challenger, actor=OPERATOR,
    )  # fmt: skip
    if prepared.split is None:
        from core.data.dataset import split_dataset

        config = prepared.recipe.config
        split = split_dataset(prepared.dataset, val_fraction=config.val_fraction, seed=config.seed)
    else:
        split = prepared.split
    configure_cpu_threads()
    with _progress_bar("train", unit="step") as bar:
        saved = train_and_save(
            *split, prepared.recipe.config, models_root=models_root,
            model_name=prepared.challenger, data_fingerprint=prepared.dataset.fingerprint,
            actor=OPERATOR, on_progress=_train_progress(bar),
        )  # fmt: skip
    record_retrain(store, prepared, challenger=saved.folder.name, job=None, actor=OPERATOR)
    return {
        "dataset": prepared.saved.name, "parent": prepared.plan.parent_name,
        "counts": prepared.plan.counts(), "challenger": saved.folder.name,
        "model_dir": str(saved.folder), "recipe_model": prepared.recipe.name,
        "split": "inherited" if prepared.split is not None else "fresh",
        "train_seconds": round(saved.result.train_seconds, 3),
    }  # fmt: skip


def _add_save_dataset(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("save-dataset", help="save a labelled file on the server as a data set")
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    p.add_argument("name", help="the data set's name: 1-64 letters, digits, '_', '-' or '.'")
    _add_column_options(p, label=True)
    _add_json_option(p, "print the saved data set as JSON")
    p.set_defaults(handler=_cmd_save_dataset)


def _add_datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list the saved data sets, newest first")
    p.add_argument("--all", action="store_true", help="retired data sets too")
    _add_json_option(p, "print them as JSON")
    p.set_defaults(handler=_cmd_datasets)


def _add_retrain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "retrain", help="build the next version of a saved data set from the team's corrections "
        "and train the challenger",
    )  # fmt: skip
    p.add_argument("parent", help="the saved data set to correct")
    p.add_argument("--name", help="the new version's name (default: PARENT-v2, -v3, ...)")
    p.add_argument("--challenger", help="the challenger's name (default: NAME-challenger)")
    p.add_argument(
        "--plan-only", action="store_true",
        help="print what the next version would change (JSON) and stop",
    )  # fmt: skip
    _add_json_option(p, "print the result as JSON")
    p.set_defaults(handler=_cmd_retrain)


# ----------------------------------------------------------- board


def _cmd_board(args: argparse.Namespace) -> None:
    """Each desk's open complaints of FILE against its turnaround time (core.board)."""
    from core.board.board import BoardConfig, build_board, render_board_text
    from core.board.tat import load_tat
    from core.data.intake import load_table
    from core.data.limits import IntakeLimits

    config = BoardConfig(
        received_col=args.received_col, desk_col=args.desk_col, as_of=_as_of(args.as_of),
        top=args.top,
    )  # fmt: skip
    tat = load_tat(args.tat)  # a bad TAT file fails before the data file is read
    table = load_table(Path(args.file), limits=IntakeLimits.from_env())
    board = build_board(table, tat, config)
    if args.json:
        _emit_json(board.to_json())
    else:
        print(render_board_text(board))


def _as_of(value: str | None):
    """--as-of as a datetime (naive: the TAT file's time zone); None: now."""
    from datetime import datetime

    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError as err:
        raise CommandError(
            f"--as-of {value!r} is not a date and time; write e.g. 2026-11-30T14:05+05:30"
        ) from err


def _add_board(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "board", help="each desk's open complaints against its turnaround time (routing board)"
    )
    p.add_argument("file", help="classified (or desk-labelled) CSV, TSV, XLSX or Parquet file")
    p.add_argument(
        "--tat", help="turnaround-time TOML file (default: $GRIEVANCE_LENS_TAT, else the shipped "
        "core/board/tat.toml)",
    )  # fmt: skip
    p.add_argument(
        "--as-of", help="measure ages at this time, ISO 8601 (default: now; naive: the TAT "
        "file's time zone)",
    )  # fmt: skip
    p.add_argument("--desk-col", help="routed desk column (default: predicted_label, or detected)")
    p.add_argument("--received-col", help="received time column (default: received_at, detected)")
    p.add_argument("--top", type=int, default=100, help="at-risk complaints to list (default 100)")
    _add_json_option(p, "print the board as JSON on stdout")
    p.set_defaults(handler=_cmd_board)


# Each entry adds one subcommand; later capabilities append theirs here.
COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_validate, _add_demo_data, _add_train, _add_evaluate, _add_classify, _add_audit,
    _add_explain, _add_probe, _add_verify_store, _add_promote, _add_compare, _add_save_dataset,
    _add_datasets, _add_retrain, _add_board,
]  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, one subcommand per entry of COMMANDS."""
    parser = _Parser(prog="python -m core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add_command in COMMANDS:
        add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the process exit code."""
    _log_to_stderr()
    args = build_parser().parse_args(argv)
    try:
        code = args.handler(args) or 0  # most handlers return None: success
        sys.stdout.flush()  # a reader that went away shows here, not in the flush at exit
    except BrokenPipeError:
        return _stdout_closed()
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if _is_user_error(exc):
            print(f"error: {_one_line(exc)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        # The last line of defence: a bug, not bad input.
        print(
            f"error: unexpected {type(exc).__name__}: {_one_line(exc)}; this is a bug, the "
            "traceback is logged",
            file=sys.stderr,
        )
        log.error("the traceback of that unexpected error, for a bug report:", exc_info=exc)
        return EXIT_INTERNAL
    return code


def _is_user_error(exc: Exception) -> bool:
    """A UserError, or a path given on the command line that is missing, a folder or not
    readable (the OSError names it)."""
    return isinstance(exc, UserError) or (isinstance(exc, _PATH_ERRORS) and bool(exc.filename))


def _log_to_stderr() -> None:
    """Warnings and the traceback of an unexpected error go to stderr; a no-op when logging is
    configured already (by a caller of `main`, or pytest)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


def _stdout_closed() -> int:
    """The reader of stdout went away (`... | head`): end quietly, as `yes | head` does. Standard
    output now points at /dev/null, so the flush at exit cannot fail a second time."""
    with contextlib.suppress(OSError, ValueError):  # no file descriptor: a test's StringIO
        stdout = sys.stdout.fileno()
        os.dup2(os.open(os.devnull, os.O_WRONLY), stdout)
    return EXIT_BROKEN_PIPE


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"no such file: {exc.filename}; check the path"
    if isinstance(exc, IsADirectoryError) and exc.filename:
        return f"{exc.filename} is a folder; give a file"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"permission denied: {exc.filename}"
    return " ".join(str(exc).split()) or type(exc).__name__
