"""The `audit` command: rows whose label looks wrong (confident learning), predicted out of fold
by the bag of words, the quick recipe, or a saved model's own training settings."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

from core.cli.common import (
    CommandError,
    add_column_options,
    add_json_option,
    add_runtime_options,
    check_runtime,
    emit_json,
    model_dir_of,
    progress_bar,
)


def _cmd_audit(args: argparse.Namespace) -> None:
    """Run the audit and record it in the review store as one "audit" run, as the app does."""
    from core.access import OPERATOR
    from core.review.store import Store, default_db_path
    from core.tasks.audit import record_audit_run

    with Store.open(default_db_path()) as store:
        if store.read_only:  # refused before hours of folds, not after
            raise CommandError(
                f"the review store {store.path} is read-only, so the audit could not be "
                "recorded; make it writable or point GRIEVANCE_LENS_DATA_DIR at a writable folder"
            )
        result, document = _run_audit(args)
        record_audit_run(store, result, actor=OPERATOR)
    if args.json:
        emit_json(document)
        return
    _print_issues(result, args.show)


def _run_audit(args: argparse.Namespace):
    """The audit `args` ask for: its AuditResult and its --json document."""
    from core.analysis.audit import AuditConfig, check_auditable, run_audit
    from core.data.validation import load_dataset

    config = AuditConfig(folds=args.folds, seed=args.seed)  # bad --folds fails before reading
    check_runtime(args)
    model = args.model if args.model is not None else "bow"
    train_config = _embedding_settings(args) if model == "quick" else None
    folder = None if model in ("bow", "quick") else model_dir_of(model)  # before the file is read
    if args.backbone is not None and train_config is None:
        raise CommandError("--backbone is for --model quick; a saved model's folder names its own")
    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    check_auditable(dataset, config.folds)  # before a progress bar starts drawing on stderr
    if model == "bow":
        with progress_bar("audit (bag of words)", unit="fold", total=config.folds) as bar:
            result = run_audit(dataset, config, on_progress=lambda p: bar.update(p.done - bar.n))
        document = result.to_json()
    elif train_config is not None:
        with _operator_precision(args.precision):
            result, document = _embedding_audit(dataset, config, train_config)
    else:
        with _operator_precision(args.precision):
            result, document = _fine_tune_audit(dataset, config, folder, args.device)
    return result, document


def _print_issues(result, show: int) -> None:
    print(f"{len(result.issues)} suspected label issues ({result.model}, {result.folds} folds)")
    for issue in result.issues[:show]:
        text = " ".join(issue.text.split())
        print(
            f"  row {issue.row}: {issue.given_label} -> {issue.suggested_label} "
            f"(quality {issue.quality:.3f}) {issue.reason}\n      {text[:100]}"
        )
    if len(result.issues) > show:
        print(f"  ... and {len(result.issues) - show} more (see --json)")


def _embedding_settings(args: argparse.Namespace):
    """The TrainConfig of `--model quick` (checked before the file is read)."""
    from core.analysis.audit_embedding import embedding_train_config
    from core.models.transformer.config import MINILM

    config = embedding_train_config(args.backbone if args.backbone is not None else MINILM)
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


def _embedding_audit(dataset, config, train_config):
    """Embed every text once with the frozen encoder, then fit a head per fold; tqdm bars of
    texts embedded, then of folds, on stderr."""
    from core.analysis.audit_embedding import run_embedding_audit
    from core.models.transformer.config import backbone_label

    name = f"audit (quick, {backbone_label(train_config.backbone)})"
    with contextlib.ExitStack() as stack:
        bars: dict[str, object] = {}

        def bar(kind: str, **options):
            if kind not in bars:  # opened at the first report: a load error prints alone
                bars[kind] = stack.enter_context(progress_bar(f"{name} {kind}", **options))
            return bars[kind]

        def on_embed(progress) -> None:
            embedded = bar("embedding", unit="text", total=progress.total)
            embedded.update(progress.done - embedded.n)

        def on_fold(progress) -> None:
            folds = bar("folds", unit="fold", total=progress.total)
            folds.update(progress.done - folds.n)

        result = run_embedding_audit(
            dataset, config, train_config, on_embed=on_embed, on_progress=on_fold
        )
    document = {**result.to_json(), "backbone": backbone_label(train_config.backbone)}
    return result, document


def _fine_tune_audit(dataset, config, folder: Path, device: str):
    """Fine-tune the saved model's TrainConfig on each fold (on `device`), a tqdm bar of steps
    on stderr; a quick model is audited the quick way over its own backbone."""
    from core.analysis.audit import run_audit
    from core.analysis.audit_fine_tune import fine_tune_fit, model_audit_settings
    from core.models.card import read_card
    from core.models.transformer.config import QUICK

    config, train_config = model_audit_settings(read_card(folder), config)
    train_config = dataclasses.replace(train_config, device=device)
    if train_config.recipe == QUICK:  # a quick model: its encoder embeds once, heads per fold
        result, document = _embedding_audit(dataset, config, train_config)
        return result, {**document, "model_dir": str(folder)}
    folds_done = [0]
    # The bar opens at the first step, so a backbone that fails to load ends with the error
    # line alone, and a fast run still shows its progress.
    with contextlib.ExitStack() as stack:
        bars = []

        def on_step(progress) -> None:
            if not bars:
                bars.append(stack.enter_context(
                    progress_bar(f"audit ({train_config.backbone})", unit="step")
                ))  # fmt: skip
            bar = bars[0]
            bar.total = progress.total * config.folds
            bar.update(folds_done[0] * progress.total + progress.done - bar.n)
            bar.set_postfix({"fold": f"{folds_done[0] + 1}/{config.folds}"}, refresh=False)

        def on_fold(progress) -> None:
            folds_done[0] = int(progress.done)

        fit = fine_tune_fit(train_config, on_progress=on_step)
        result = run_audit(dataset, config, fit=fit, on_progress=on_fold)
    document = {**result.to_json(), "model_dir": str(folder), "backbone": train_config.backbone}
    return result, document


def _add_audit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("audit", help="find rows whose label looks wrong (confident learning)")
    p.add_argument("file", help="labelled CSV, TSV, XLSX or Parquet file")
    p.add_argument(
        "--model",
        help="the model that predicts each row without having seen it: bow (default; the "
        "bag of words, seconds), quick (a pretrained encoder's frozen embeddings, once, "
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
    add_column_options(p, label=True)
    p.add_argument("--show", type=int, default=20, help="issues to print without --json")
    add_runtime_options(p)  # a model folder or quick: where its fold models train and predict
    add_json_option(p, "print the issues as JSON on stdout")
    p.set_defaults(handler=_cmd_audit)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `audit`."""
    _add_audit(sub)
