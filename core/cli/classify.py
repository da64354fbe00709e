"""The `classify` command: route every complaint of a file or a folder of parts, in this process
or on a Ray actor pool (core.scale)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core.cli.common import (
    CommandError,
    add_column_options,
    add_json_option,
    add_model_option,
    add_runtime_options,
    check_runtime,
    chosen_review_threshold,
    emit_json,
    load_model_card,
    progress_bar,
)


def _cmd_classify(args: argparse.Namespace) -> None:
    # Without --review-threshold each model flags by its own policy (saved in its card).
    threshold = None if args.review_threshold is None else chosen_review_threshold(args)
    for option in ("workers", "batch_size", "cpus_per_worker"):
        if (getattr(args, option) or 1) < 1:
            raise CommandError(f"--{option.replace('_', '-')} must be 1 or more")
    model_dir = load_model_card(args.model)  # a wrong folder fails before Ray or torch start
    if args.engine == "local":  # on Ray, the actors' hardware decides (core.scale)
        check_runtime(args)
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
    with progress_bar("classify", unit="text") as bar:
        result = score_archive(config, on_rows=bar.update)
    if args.json:
        emit_json({
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


def _add_classify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "classify", help="route every complaint of a file or a folder of parts; locally or on Ray"
    )
    add_model_option(p)
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
    add_runtime_options(p, routes=True)
    add_column_options(p, label=False)
    p.add_argument(
        "--review-threshold", type=float,
        help="flag needs_review below this top probability (default: the model's own, chosen "
        "on its validation rows and saved in its card)",
    )  # fmt: skip
    add_json_option(p, "print rows and out path as JSON")
    p.set_defaults(handler=_cmd_classify)


def register(sub: argparse._SubParsersAction) -> None:
    """Add `classify`."""
    _add_classify(sub)
