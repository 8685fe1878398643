"""GET /models/{id}/posterior/plot: a PNG trace-and-density plot of one coefficient's draws."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from sklearn.datasets import load_breast_cancer

from service.plots.trace import CoefficientTrace, trace_png
from tests.service.conftest import train_body

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FEATURES = ["radius", "texture", "perimeter"]
FEW_DRAWS = {"n_draws": 20, "burn_in": 10, "n_chains": 2, "random_state": 0}


def train(client: TestClient, model_type: str, **params: object) -> str:
    """Train a small binary model on three breast-cancer features; its id."""
    X, y = load_breast_cancer(return_X_y=True)
    body = train_body(X[:80, :3], y[:80], model_type, feature_names=FEATURES, params=params)
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    return r.json()["model_id"]


def plot(client: TestClient, model_id: str, **params: object):
    """The plot response of ``model_id``."""
    return client.get(f"/models/{model_id}/posterior/plot", params=params)


def size_of(png: bytes) -> tuple[int, int]:
    """(width, height) of a PNG, decoded in full."""
    with Image.open(io.BytesIO(png)) as image:
        image.load()
        return image.size


@pytest.fixture(scope="module")
def client(module_client: TestClient) -> TestClient:
    """One app for the module: its tests train models of three features and read them."""
    return module_client


@pytest.fixture(scope="module")
def mcmc_id(client: TestClient) -> str:
    """A small two-chain MCMC model, trained once for the module (plots only read it)."""
    return train(client, "mcmc_svm", **FEW_DRAWS)


def test_png_of_a_coefficient_by_name_and_by_index(client, mcmc_id):
    r = plot(client, mcmc_id, coef="texture")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(PNG_SIGNATURE)
    width, height = size_of(r.content)
    assert 400 <= width <= 3000 and 200 <= height <= 2000 and width > height
    by_index = plot(client, mcmc_id, coef="1")
    assert by_index.status_code == 200 and size_of(by_index.content) == (width, height)
    assert by_index.content == r.content


def test_intercept_level_and_scale(client, mcmc_id):
    for params in (
        {"coef": "intercept"},
        {"coef": "radius", "level": 0.5, "scale": "standardised"},
    ):
        r = plot(client, mcmc_id, **params)
        assert r.status_code == 200 and r.content.startswith(PNG_SIGNATURE), r.text
    for bad in ({"coef": "radius", "level": 1.5}, {"coef": "radius", "scale": "log"}, {}):
        assert plot(client, mcmc_id, **bad).status_code == 422


def test_unknown_coefficient_is_422_naming_the_field(client, mcmc_id):
    for coef in ("nope", "3", "-1", "x0"):
        r = plot(client, mcmc_id, coef=coef)
        assert r.status_code == 422 and r.json()["code"] == "INVALID_INPUT"
        (problem,) = r.json()["details"]
        assert problem["field"] == "coef"
        assert all(name in problem["problem"] for name in ["intercept", *FEATURES])


@pytest.mark.parametrize(("model_type", "reason"), [("em_svm", "draws"), ("lda", "not Bayesian")])
def test_models_without_draws_are_409(client, model_type, reason):
    r = plot(client, train(client, model_type), coef="radius")
    assert r.status_code == 409 and r.json()["code"] == "CONFLICT"
    assert reason in r.json()["error"] and "mcmc_svm" in r.json()["error"]


def test_unknown_model_is_404(client):
    r = plot(client, "m_" + "0" * 32, coef="radius")
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"


def test_multiclass_needs_a_class(make_client, iris):
    client = make_client()  # an app of its own: mcmc_svm here has four features, not three
    X, y = iris
    body = train_body(X[::3], y[::3], "mcmc_svm", params=FEW_DRAWS)
    model_id = client.post("/train", json=body).json()["model_id"]
    r = plot(client, model_id, coef="x2", **{"class": "virginica"})
    assert r.status_code == 200 and r.content.startswith(PNG_SIGNATURE), r.text
    for params in ({}, {"class": "rose"}):
        r = plot(client, model_id, coef="x2", **params)
        assert r.status_code == 422 and r.json()["details"][0]["field"] == "class"
        assert "virginica" in r.json()["details"][0]["problem"]


def test_openapi_declares_png_and_every_status(client):
    operation = client.get("/openapi.json").json()["paths"]["/models/{ref}/posterior/plot"]
    responses = operation["get"]["responses"]
    assert list(responses["200"]["content"]) == ["image/png"]
    assert {"404", "409", "422", "503"} <= set(responses)


def test_render_handles_constant_draws_and_dollar_signs():
    trace = CoefficientTrace(
        draws=np.zeros((2, 30)), name="price_$_$", mean=0.0, lower=0.0, upper=0.0, level=0.9
    )
    assert size_of(trace_png(trace))[0] > 0


def test_the_plot_shows_the_interval_of_the_level_asked_for(client, mcmc_id, monkeypatch):
    import service.api.routes.models as routes

    shown = []
    monkeypatch.setattr(routes, "trace_png", lambda trace: shown.append(trace) or b"png")
    assert plot(client, mcmc_id, coef="texture", level=0.9).status_code == 200
    posterior = client.get(f"/models/{mcmc_id}/posterior", params={"level": 0.9}).json()
    (row,) = [c for c in posterior["coefficients"] if c["name"] == "texture"]
    (trace,) = shown
    assert trace.level == 0.9
    assert (trace.lower, trace.upper) == pytest.approx((row["lower"], row["upper"]))
