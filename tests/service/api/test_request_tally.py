"""``RequestTally`` exposes what ``prometheus_client``'s own Counter and Histogram would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from service.api.metrics import REQUEST_BUCKETS
from service.api.request_tally import LABELS, RequestTally

KEYS = st.tuples(
    st.sampled_from(["GET", "POST"]),
    st.sampled_from(["/predict", "/models/{model_id}", "<unmatched>"]),
    st.sampled_from([200, 404, 422, 503]),
)
# latencies on and around the bucket bounds, where ``le`` decides which bucket counts them
SECONDS = st.one_of(
    st.sampled_from(REQUEST_BUCKETS),
    st.floats(min_value=0.0, max_value=60.0, allow_nan=False),
)


def reference(observations: list[tuple[tuple[str, str, int], float]]) -> bytes:
    """The text ``prometheus_client``'s collectors give for ``observations`` (without the
    ``*_created`` series, as ``Metrics`` sets it)."""
    disable_created_metrics()
    registry = CollectorRegistry()
    requests = Counter("bsvm_http_requests", "HTTP requests served.", LABELS, registry=registry)
    latency = Histogram(
        "bsvm_http_request_duration_seconds",
        "Time from request to response.",
        LABELS,
        buckets=REQUEST_BUCKETS,
        registry=registry,
    )
    for (method, route, status), seconds in observations:
        requests.labels(method, route, str(status)).inc()
        latency.labels(method, route, str(status)).observe(seconds)
    return generate_latest(registry)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(KEYS, SECONDS), max_size=40))
def test_the_exposition_is_the_collectors_own(observations):
    registry = CollectorRegistry()
    tally = RequestTally(REQUEST_BUCKETS)
    registry.register(tally)
    for (method, route, status), seconds in observations:
        tally.observe(method, route, status, seconds)
    assert generate_latest(registry) == reference(observations)
