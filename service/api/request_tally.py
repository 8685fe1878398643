"""The request counter and latency histogram, tallied in plain lists and exposed at scrape time.

``prometheus_client``'s ``Counter.inc`` and ``Histogram.observe`` take a lock per value (two to
three per request, ~2.4 µs together). Every request is observed on the event loop's thread, so
``RequestTally`` keeps the same numbers in plain lists (~0.5 µs) and hands them to the registry
as a custom collector (``prometheus_client``'s extension point for values kept elsewhere): the
exposition is the one the two collectors gave, ``bsvm_http_requests_total`` and
``bsvm_http_request_duration_seconds_{bucket,sum,count}``.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric

LABELS = ("method", "route", "status")
Key = tuple[str, str, int]


class RequestTally:
    """Requests served and their latency, by (method, route template, status)."""

    def __init__(self, buckets: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in buckets)
        # per key: [count, sum of seconds, then one count per bucket (non-cumulative), +Inf last]
        self.rows: dict[Key, list[float]] = {}
        self.lock = threading.Lock()  # only against a scrape reading while a new key is added

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request of ``seconds``."""
        row = self.rows.get((method, route, status))
        if row is None:
            row = [0, 0.0] + [0] * (len(self.bounds) + 1)
            with self.lock:
                row = self.rows.setdefault((method, route, status), row)
        row[0] += 1
        row[1] += seconds
        row[2 + bisect_left(self.bounds, seconds)] += 1  # le: the first bound >= seconds

    def collect(self) -> Iterator[Metric]:
        """The counter and the histogram, as ``prometheus_client`` exposes them."""
        requests = CounterMetricFamily("bsvm_http_requests", "HTTP requests served.", labels=LABELS)
        latency = HistogramMetricFamily(
            "bsvm_http_request_duration_seconds", "Time from request to response.", labels=LABELS
        )
        with self.lock:
            rows = [(key, list(row)) for key, row in self.rows.items()]
        for (method, route, status), row in rows:
            labels = [method, route, str(status)]
            requests.add_metric(labels, row[0])
            cumulative, buckets = 0.0, []
            for bound, count in zip((*self.bounds, float("inf")), row[2:], strict=True):
                cumulative += count
                buckets.append((_bound_text(bound), cumulative))
            latency.add_metric(labels, buckets, row[1])
        yield requests
        yield latency


def _bound_text(bound: float) -> str:
    """A bucket's ``le`` label as ``prometheus_client`` writes it (``0.005``, ``1.0``, ``+Inf``)."""
    if bound == float("inf"):
        return "+Inf"
    return repr(float(bound))
