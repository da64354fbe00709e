"""The intake API's Prometheus metrics (`GET /metrics`, text format via prometheus-client).

Two kinds. Per process: requests by route and status, and their latency histogram (with
`serve --workers N`, each worker counts its own, as Prometheus expects of replicas; scrape each or
sum them). From the store, read at scrape time and so the same whichever worker answers:
complaints by routed desk, open complaints, the share sent to people and the verdicts waiting.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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


class ApiMetrics:
    """One app's registry (its own, so tests can build many apps in one process)."""

    def __init__(self, counts: Callable[[], dict[str, Any]]) -> None:
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

    def observe(self, route: str, status: int, seconds: float) -> None:
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)
