"""The `monitor` command: the live model's drift and health, from the review store's inbox and
trail (core.intake.monitor, core.monitor), as text or as the `--json` document."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.cli.common import CommandError, add_json_option, emit_json

if TYPE_CHECKING:
    from core.monitor.report import MonitorReport


def _cmd_monitor(args: argparse.Namespace) -> None:
    """The monitor's report of the complaints received since --since, against the live model."""
    from core.intake.monitor import live_baseline, read_monitor
    from core.paths import models_dir
    from core.review.store import Store, default_db_path

    since = _since(args.since)  # a bad time fails before the store is opened
    path = default_db_path()
    if not path.is_file():  # asking creates no store
        raise CommandError(
            f"no review store at {path} yet: start the intake API (`python -m core serve`) and "
            "post complaints, or set GRIEVANCE_LENS_DATA_DIR to the server's data folder"
        )
    with Store.open(path) as store:
        report = read_monitor(store, live_baseline(store, models_dir()), since=since)
    if args.json:
        emit_json(report.to_json())
    else:
        print(render_monitor_text(report))


def _since(value: str | None) -> datetime | None:
    """--since as an aware datetime (naive: UTC), in the years the board reads; None: default."""
    from core.board.moments import parse_as_of

    if value is None:
        return None
    moment = parse_as_of(value, "--since")
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _psi(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def render_monitor_text(report: MonitorReport) -> str:
    """The report as a person reads it in a terminal."""
    base = report.baseline
    profile = base.profile
    lines = [
        f"Monitor of the live model {base.model or '(none)'}: complaints received since "
        f"{report.since} (UTC), as of {report.as_of}",
        f"{report.complaints:,} complaints; {_share(report.review_share)} sent to people "
        f"(validation {_share(profile and profile.review_share)}); "
        f"{_share(report.unknown_share)} fit no desk "
        f"(validation {_share(profile and profile.unknown_share)})",
    ]
    if base.missing:
        lines.append(f"No baseline: {base.missing}")
    lines.append(_latency_line(report))
    lines.append(f"Drift rule: {report.rule.describe()}")
    lines += _week_lines(report)
    lines += _day_lines(report)
    lines += [f"WARNING: {w.message}" for w in report.warnings] or ["No warnings."]
    return "\n".join(lines)


def _latency_line(report: MonitorReport) -> str:
    lat = report.latency
    if lat is None:
        return "Routing latency: no batch routed by the intake API in this window"
    return (
        f"Routing latency per batch: p50 {lat.p50_ms:.1f} ms, p95 {lat.p95_ms:.1f} ms, p99 "
        f"{lat.p99_ms:.1f} ms ({lat.batches:,} batches; {lat.per_complaint_ms:.1f} ms per "
        "complaint)"
    )


def _week_lines(report: MonitorReport) -> list[str]:
    if not report.weeks:
        return ["No complaint of the live model in this window."]
    lines = ["week      complaints  desk PSI  confidence PSI  no desk  to people  judged"]
    for w in report.weeks:
        lines.append(
            f"{w.counts.week:<9} {w.counts.complaints:>10,}  {_psi(w.desk_psi):>8}  "
            f"{_psi(w.confidence_psi):>14}  {_share(w.unknown_share):>7}  "
            f"{_share(w.review_share):>9}  {'yes' if w.judged else 'too few'}"
        )
    return lines


def _day_lines(report: MonitorReport) -> list[str]:
    lines = []
    for d in report.days:
        channels = ", ".join(f"{c} {n:,}" for c, n in d.by_channel.items())
        desks = ", ".join(f"{k} {n:,}" for k, n in d.by_desk.items())
        lines.append(f"{d.day}: {d.complaints:,} complaints; channels: {channels}; desks: {desks}")
    return lines


def register(sub: argparse._SubParsersAction) -> None:
    """Add `monitor`."""
    from core.board.moments import YEARS  # no pandas: cheap at start-up

    p = sub.add_parser(
        "monitor", help="the live model's drift and health: complaints per day, shares, weekly "
        "drift against its validation rows, routing latency, warnings",
    )  # fmt: skip
    p.add_argument(
        "--since", help=f"complaints received from this time on, ISO 8601, in {YEARS} (naive: "
        "UTC; default: the start of the ISO week seven weeks ago)",
    )  # fmt: skip
    add_json_option(p, "print the report as JSON on stdout")
    p.set_defaults(handler=_cmd_monitor)
