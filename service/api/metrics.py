"""Prometheus metrics on a per-app ``CollectorRegistry``, served as text at ``GET /metrics``.

========================================  =========  ===============================
metric                                    kind       labels
========================================  =========  ===============================
``bsvm_http_requests_total``              counter    method, route, status
``bsvm_http_request_duration_seconds``    histogram  method, route, status
``bsvm_trainings_total``                  counter    model_type, outcome
``bsvm_training_duration_seconds``        histogram  model_type
``bsvm_models_cached``                    gauge      (none)
``bsvm_models_cached_bytes``              gauge      (none)
``bsvm_backend_unavailable_total``        counter    backend, route
``bsvm_stale_answers_total``              counter    route
========================================  =========  ===============================

``route`` is the path template (``/models/{model_id}``), so ids never become label values.
``backend_unavailable`` counts the requests answered 503 because a back end (``database``,
``store``) was down or did not answer; ``stale_answers`` the predicts answered from memory while
the database was unreachable (``BSVM_STALE_IF_ERROR_S``).
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from service.api.openapi import error_responses
from service.api.request_tally import RequestTally
from service.repository.store import ModelStore

REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
TRAINING_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800)
TRAINING_OUTCOMES = ("succeeded", "failed", "cancelled", "timeout")


class Metrics:
    """The service's collectors, each on this object's own registry."""

    def __init__(self) -> None:
        disable_created_metrics()  # the *_created series only double the scrape
        self.registry = CollectorRegistry()
        self.tally = RequestTally(REQUEST_BUCKETS)  # the request counter and latency histogram
        self.registry.register(self.tally)
        self.trainings = Counter(
            "bsvm_trainings",
            "Trainings finished, by model type and outcome.",
            ("model_type", "outcome"),
            registry=self.registry,
        )
        self.training_seconds = Histogram(
            "bsvm_training_duration_seconds",
            "Wall-clock seconds of one training.",
            ("model_type",),
            buckets=TRAINING_BUCKETS,
            registry=self.registry,
        )
        self.models_cached = Gauge(
            "bsvm_models_cached", "Fitted models held in the LRU cache.", registry=self.registry
        )
        self.models_cached_bytes = Gauge(
            "bsvm_models_cached_bytes",
            "Artifact bytes of the fitted models held in the LRU cache (BSVM_MODEL_CACHE_MB).",
            registry=self.registry,
        )
        self.backend_unavailable = Counter(
            "bsvm_backend_unavailable",
            "Requests answered 503 because a back end (database, store) was down or hung.",
            ("backend", "route"),
            registry=self.registry,
        )
        self.stale_answers = Counter(
            "bsvm_stale_answers",
            "Predicts answered from memory while the registry database was unreachable.",
            ("route",),
            registry=self.registry,
        )
        self.router = self._make_router()

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one request and its latency."""
        self.tally.observe(method, route, status, seconds)

    def observe_outage(self, backend: str, route: str) -> None:
        """Count one request answered 503 because ``backend`` was unavailable."""
        self.backend_unavailable.labels(backend, route).inc()

    def observe_stale(self, route: str) -> None:
        """Count one predict answered from a stale registry answer."""
        self.stale_answers.labels(route).inc()

    def record_training(self, model_type: str, outcome: str, seconds: float) -> None:
        """Count one finished training (outcome: succeeded, failed, cancelled, timeout)."""
        self.trainings.labels(model_type, outcome).inc()
        self.training_seconds.labels(model_type).observe(seconds)

    def watch_store(self, store: ModelStore) -> None:
        """Read ``store.cached_count`` and ``cached_bytes`` at every scrape."""
        self.models_cached.set_function(lambda: float(store.cached_count))
        self.models_cached_bytes.set_function(lambda: float(store.cached_bytes))

    def render(self) -> bytes:
        """The Prometheus text exposition of every collector."""
        return generate_latest(self.registry)

    def _make_router(self) -> APIRouter:
        router = APIRouter(tags=["operations"])

        @router.get(
            "/metrics",
            response_class=Response,
            responses={
                200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}}},
                **error_responses(401),
            },
        )
        def metrics() -> Response:
            """Prometheus metrics in the text exposition format."""
            return Response(self.render(), media_type=CONTENT_TYPE_LATEST)

        return router
