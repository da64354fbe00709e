"""The intake API's Prometheus metrics (`GET /metrics`, text format via prometheus-client).

Two kinds. Per process: requests by route and status, and their latency histogram (with
`serve --workers N`, each worker counts its own, as Prometheus expects of replicas; scrape each or
sum them). From the store, read at scrape time and so the same whichever worker answers:
complaints by routed desk, open complaints, the share sent to people and the verdicts waiting,
and the monitor's figures (core.monitor): today's complaints by channel and desk, the
week's drift against the serving model's validation rows with its threshold and warnings, and
the routing latency every process recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core.monitor.drift import CONFIDENCE, DESK_MIX, UNKNOWN_DESK

if TYPE_CHECKING:
    from core.monitor.drift import WeekDrift
    from core.monitor.report import MonitorReport

PREFIX = "grievance_lens"
# Routing one complaint takes milliseconds to tens of them; a batch of 500, seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class InboxCollector(Collector):
    """The store's figures, read when Prometheus scrapes."""

    def __init__(self, counts: Callable[[], dict[str, Any]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        counts = self._counts()
        by_desk = CounterMetricFamily(
            f"{PREFIX}_inbox_complaints", "Complaints stored, by routed desk", labels=["desk"]
        )
        for desk, n in counts["by_desk"].items():
            by_desk.add_metric([desk], n)
        yield by_desk
        yield GaugeMetricFamily(
            f"{PREFIX}_inbox_open", "Complaints not resolved yet (the queue depth)",
            value=counts["open"],
        )  # fmt: skip
        yield GaugeMetricFamily(
            f"{PREFIX}_inbox_review_share", "Share of stored complaints sent to people",
            value=counts["review_share"],
        )  # fmt: skip
        yield GaugeMetricFamily(
            f"{PREFIX}_triage_waiting", "Inbox complaints waiting for a reviewer's verdict",
            value=counts["waiting_review"],
        )  # fmt: skip


def _gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_monitor_{name}", documentation, labels=labels)


class MonitorCollector(Collector):
    """The monitor's figures, from its report of this ISO week and the last (cached briefly)."""

    def __init__(self, report: Callable[[], MonitorReport]) -> None:
        self._report = report

    def collect(self) -> Iterator[Metric]:
        report = self._report()
        yield GaugeMetricFamily(
            f"{PREFIX}_monitor_baseline", "1 when the serving model has a validation profile",
            value=int(report.baseline.profile is not None),
        )  # fmt: skip
        yield from _today(report)
        week = report.current or (report.weeks[-1] if report.weeks else None)
        if week is not None:
            yield from _week(report, week)
        warned = {w.kind for w in report.warnings}
        warning = _gauge("warning", "1 while the monitor warns, by kind", ["kind"])
        for kind in (DESK_MIX, CONFIDENCE, UNKNOWN_DESK):
            warning.add_metric([kind], int(kind in warned))
        yield warning
        if report.latency is not None:
            routing = _gauge("routing_seconds", "Batch routing time, by quantile", ["quantile"])
            for q, ms in (("0.5", report.latency.p50_ms), ("0.95", report.latency.p95_ms),
                          ("0.99", report.latency.p99_ms)):  # fmt: skip
                routing.add_metric([q], ms / 1000)
            yield routing


def _today(report: MonitorReport) -> Iterator[Metric]:
    """Complaints received today (UTC), by channel and by routed desk."""
    day = datetime.now(UTC).date().isoformat()
    counts = next((d for d in report.days if d.day == day), None)
    for label, by in (("channel", "by_channel"), ("desk", "by_desk")):
        family = _gauge(f"complaints_today_{by}", f"Complaints received today (UTC), {by}",
                        [label])  # fmt: skip
        for value, n in (getattr(counts, by) if counts else {}).items():
            family.add_metric([value], n)
        yield family


def _week(report: MonitorReport, week: WeekDrift) -> Iterator[Metric]:
    """The week the warnings speak for (or, before one is judged, this one)."""
    yield GaugeMetricFamily(
        f"{PREFIX}_monitor_week_complaints", "Complaints of the serving model in the week measured",
        value=week.counts.complaints,
    )  # fmt: skip
    psi = _gauge("drift_psi", "Population stability index against validation", ["figure"])
    for figure, value in ((DESK_MIX, week.desk_psi), (CONFIDENCE, week.confidence_psi)):
        if value is not None:
            psi.add_metric([figure], value)
    yield psi
    yield GaugeMetricFamily(
        f"{PREFIX}_monitor_drift_threshold", "PSI above which the monitor warns",
        value=report.rule.psi_threshold,
    )  # fmt: skip
    share = _gauge("share", "Share sent to people or fitting no desk", ["share", "rows"])
    share.add_metric(["review", "week"], week.review_share)
    share.add_metric(["unknown_desk", "week"], week.unknown_share)
    profile = report.baseline.profile
    if profile is not None:
        share.add_metric(["review", "validation"], profile.review_share)
        if profile.unknown_share is not None:
            share.add_metric(["unknown_desk", "validation"], profile.unknown_share)
    yield share


class ApiMetrics:
    """One app's registry (its own, so tests can build many apps in one process)."""

    def __init__(
        self,
        counts: Callable[[], dict[str, Any]],
        monitor: Callable[[], MonitorReport] | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{PREFIX}_api_requests", "API requests by route and status",
            ["route", "status"], registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            f"{PREFIX}_api_request_seconds", "API request latency by route", ["route"],
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )  # fmt: skip
        self.routed = Counter(
            f"{PREFIX}_api_complaints_routed", "Complaints routed by this process, by desk",
            ["desk"], registry=self.registry,
        )  # fmt: skip
        self.registry.register(InboxCollector(counts))
        if monitor is not None:
            self.registry.register(MonitorCollector(monitor))

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
