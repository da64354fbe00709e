"""The team's closed loop: `promote` (the live model), `compare` (challenger against live),
`save-dataset` and `datasets` (named data sets), `retrain` (the next version from corrections)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from core.cli.common import (
    MODEL_HELP,
    CommandError,
    add_column_options,
    add_json_option,
    add_runtime_options,
    chosen_review_threshold,
    emit_json,
    load_model_from_args,
    progress_bar,
    train_progress,
)


def _cmd_promote(args: argparse.Namespace) -> None:
    """Make a saved model the team's live model, as the operator; the trail records it."""
    from core.access import OPERATOR
    from core.paths import models_dir
    from core.review.live import format_since, promote_model, promotion_report
    from core.review.store import Store, default_db_path

    report = _read_report(Path(args.report)) if args.report is not None else None
    with Store.open(default_db_path()) as store:
        live = promote_model(
            store, models_dir(), args.name, reason=args.reason, actor=OPERATOR, report=report
        )
        kept = promotion_report(store, live)  # the report as the trail keeps it
    if args.json:
        emit_json({**dataclasses.asdict(live), "report": kept})
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
    add_json_option(p, "print the promotion as JSON")
    p.set_defaults(handler=_cmd_promote)


def _cmd_compare(args: argparse.Namespace) -> None:
    """Two saved models on the rows of FILE that neither trained on (challenger against live)."""
    if len(args.model) != 2:
        raise CommandError(f"give --model twice (A, then B), got {len(args.model)}")
    threshold = chosen_review_threshold(args)
    from core.analysis.compare import compare_models, render_text
    from core.data.validation import load_dataset

    a, b = (load_model_from_args(model, args) for model in args.model)
    dataset, _ = load_dataset(Path(args.file), text_col=args.text_col, label_col=args.label_col)
    gold = _verdicts_since(str(a.card.get("created_at", ""))) if args.with_verdicts else None
    rows = len(dataset) + (0 if gold is None else len(gold))
    with progress_bar("compare", total=2 * rows, unit="text") as bar:
        comparison = compare_models(
            a, b, dataset, gold=gold, threshold=threshold,
            on_progress=lambda p: bar.update(p.done - bar.n),
        )  # fmt: skip
    if args.json:
        emit_json(comparison.to_json())
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
    add_column_options(p, label=True)
    p.add_argument(
        "--review-threshold", type=float, default=None,
        help="confidence below which a complaint goes to people (the review load)",
    )  # fmt: skip
    p.add_argument(
        "--with-verdicts", action="store_true",
        help="also score the triage verdicts reviewers gave since A was trained (gold rows)",
    )  # fmt: skip
    add_runtime_options(p)
    add_json_option(p, "print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_compare)


def _cmd_save_dataset(args: argparse.Namespace) -> None:
    """Save a labelled file on the server as a named data set, as the operator (trail event)."""
    from core.access import OPERATOR
    from core.data.saved import DatasetSave, datasets_root
    from core.data.validation import load_dataset
    from core.review.library import save_and_record
    from core.review.store import Store, default_db_path

    dataset, report = load_dataset(
        Path(args.file), text_col=args.text_col, label_col=args.label_col
    )
    with Store.open(default_db_path()) as store:
        saved = save_and_record(
            store, datasets_root(), DatasetSave(args.name, dataset, validation=report.to_json()),
            actor=OPERATOR,
        )  # fmt: skip
    if args.json:
        emit_json(_dataset_json(saved))
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
    from core.data.saved import datasets_root, list_datasets, read_summary

    found = list_datasets(datasets_root(), include_retired=args.all)
    if args.json:  # with each one's labels and lineage: its whole summary.json
        full = [read_summary(datasets_root(), entry.name) for entry in found]
        emit_json({"datasets": [_dataset_json(saved) for saved in full]})
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
            emit_json({"plan": plan.counts(), "by_reviewer": plan.by_reviewer,
                        "desks_before": plan.desks_before, "desks_after": plan.desks_after,
                        "already_built_as": plan.already_built_as})  # fmt: skip
            return
        name = args.name or next_version_name(datasets_root(), args.parent)
        document = _retrain_here(store, datasets_root(), models_dir(), name, args)
    if args.json:
        emit_json(document)
    else:
        print(f"saved data set {document['dataset']} ({document['counts']}); challenger "
              f"{document['challenger']} trained in {document['train_seconds']:.0f} s; "
              f"compare it: python -m core compare --model live --model "
              f"{document['challenger']} FILE")  # fmt: skip


def _retrain_here(store, datasets_root: Path, models_root: Path, name: str, args) -> dict:
    from core.access import OPERATOR
    from core.models.device import configure_cpu_threads
    from core.models.training_job import train_and_save
    from core.review.library import model_recorder
    from core.tasks.retrain import RetrainRequest, prepare_retrain, record_retrain

    prepared = prepare_retrain(
        store, datasets_root, models_root,
        RetrainRequest(args.parent, new_name=name, challenger_name=args.challenger),
        actor=OPERATOR,
    )  # fmt: skip
    if prepared.split is None:
        from core.data.dataset import split_dataset

        config = prepared.recipe.config
        split = split_dataset(prepared.dataset, val_fraction=config.val_fraction, seed=config.seed)
    else:
        split = prepared.split
    configure_cpu_threads()
    with progress_bar("train", unit="step") as bar:
        saved = train_and_save(
            *split, prepared.recipe.config, models_root=models_root,
            model_name=prepared.challenger, data_fingerprint=prepared.dataset.fingerprint,
            actor=OPERATOR, on_progress=train_progress(bar),
            record=model_recorder(store, actor=OPERATOR),
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
    add_column_options(p, label=True)
    add_json_option(p, "print the saved data set as JSON")
    p.set_defaults(handler=_cmd_save_dataset)


def _add_datasets(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("datasets", help="list the saved data sets, newest first")
    p.add_argument("--all", action="store_true", help="retired data sets too")
    add_json_option(p, "print them as JSON")
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
    add_json_option(p, "print the result as JSON")
    p.set_defaults(handler=_cmd_retrain)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `promote`, `compare`, `save-dataset`, `datasets` and `retrain`."""
    _add_promote(sub)
    _add_compare(sub)
    _add_save_dataset(sub)
    _add_datasets(sub)
    _add_retrain(sub)
