"""Prometheus metrics: per-app registry, requests by route template and status, trainings."""

from __future__ import annotations

from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api.app import create_app
from service.api.metrics import Metrics
from service.settings import Settings


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape as {(name, sorted labels): value}."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_requests_are_counted_by_route_template_and_status(tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path))) as client:
        for _ in range(3):
            client.get("/health/live")
        client.get("/no/such/thing")
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    got = samples(response.text)
    live = (("method", "GET"), ("route", "/health/live"), ("status", "200"))
    assert got[("bsvm_http_requests_total", live)] == 3
    assert got[("bsvm_http_request_duration_seconds_count", live)] == 3
    unmatched = (("method", "GET"), ("route", "<unmatched>"), ("status", "404"))
    assert got[("bsvm_http_requests_total", unmatched)] == 1
    assert not any("no/such" in str(labels) for _, labels in got)


def test_each_app_has_its_own_registry(tmp_path):
    first = create_app(Settings(data_dir=tmp_path / "a"))
    second = create_app(Settings(data_dir=tmp_path / "b"))
    with TestClient(first) as a, TestClient(second) as b:
        a.get("/health/live")
        text = b.get("/metrics").text
    assert 'route="/health/live"' not in text


def test_trainings_and_cache_gauge():
    metrics = Metrics()
    metrics.record_training("lda", "succeeded", 0.2)
    metrics.record_training("lda", "succeeded", 0.4)
    metrics.record_training("kernel_svm", "timeout", 600.0)

    class FakeStore:
        cached_count = 7
        cached_bytes = 4096

    metrics.watch_store(FakeStore())
    got = samples(metrics.render().decode())
    ok = (("model_type", "lda"), ("outcome", "succeeded"))
    assert got[("bsvm_trainings_total", ok)] == 2
    timeout = (("model_type", "kernel_svm"), ("outcome", "timeout"))
    assert got[("bsvm_trainings_total", timeout)] == 1
    assert got[("bsvm_training_duration_seconds_sum", (("model_type", "lda"),))] == 0.2 + 0.4
    assert got[("bsvm_models_cached", ())] == 7
    assert got[("bsvm_models_cached_bytes", ())] == 4096


def test_models_cached_reads_the_live_store(tmp_path, iris):
    X, y = iris
    with TestClient(create_app(Settings(data_dir=tmp_path, log_level="warning"))) as client:
        before = samples(client.get("/metrics").text)
        trained = client.post(
            "/train", json={"model_type": "lda", "X": X.tolist(), "y": y.tolist()}
        )
        held = samples(client.get("/metrics").text)
        client.delete(f"/models/{trained.json()['model_id']}")
        after = samples(client.get("/metrics").text)
    assert before[("bsvm_models_cached", ())] == 0
    assert held[("bsvm_models_cached", ())] == 1
    assert held[("bsvm_models_cached_bytes", ())] == trained.json()["artifact_bytes"]
    assert after[("bsvm_models_cached", ())] == 0 and after[("bsvm_models_cached_bytes", ())] == 0
