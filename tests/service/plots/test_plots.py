"""The evaluation routes: ROC, decision regions, the EM path over ν, the linear-SVM comparison."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image
from sklearn.datasets import load_breast_cancer

from bsvm_core import BayesianSVM
from service.model_types import model_types
from service.plots import trace as trace_plot
from service.plots.canvas import PENDING_S, RETRY_AFTER_S
from service.plots.data import (
    feature_stats,
    later_keys,
    later_plot_data,
    linear_comparison,
    path_pending,
    plot_data,
    regularisation_path,
)
from tests.service.conftest import train_body

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
FEATURES = ["radius", "texture", "perimeter", "area"]
UNKNOWN = "m_" + "0" * 32


@pytest.fixture(scope="module")
def cancer() -> tuple[np.ndarray, np.ndarray]:
    """100 rows, 4 features of breast cancer."""
    X, y = load_breast_cancer(return_X_y=True)
    return X[:100, :4], y[:100]


def train(client, X, y, model_type, **extra) -> dict:
    """Train and answer the record (named after the model type)."""
    body = train_body(X, y, model_type, feature_names=FEATURES[: X.shape[1]], name=model_type,
                      **extra)  # fmt: skip
    r = client.post("/train", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def assert_png(r) -> tuple[int, int]:
    """A decodable PNG answer; its size."""
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png" and r.content.startswith(PNG_SIGNATURE)
    with Image.open(io.BytesIO(r.content)) as image:
        image.load()
        assert 300 <= image.size[0] <= 3000 and 300 <= image.size[1] <= 2000
        return image.size


def assert_409(r, words: str) -> None:
    assert r.status_code == 409, r.text
    assert words in r.json()["error"] + str(r.json()["details"])


def test_roc_png_and_409_without_cv(client, cancer):
    X, y = cancer
    rec = train(client, X, y, "lda", evaluation={"cv": 3})
    assert_png(client.get(f"/models/{rec['model_id']}/roc.png"))
    assert_png(client.get("/models/lda:1/roc.png"))  # references work
    plain = train(client, X, y, "qda")
    assert_409(client.get(f"/models/{plain['model_id']}/roc.png"), "without cross-validation")
    assert client.get(f"/models/{UNKNOWN}/roc.png").status_code == 404
    assert client.get("/models/nobody/roc.png").status_code == 404
    assert client.get("/models/bad$ref/roc.png").status_code == 422


def test_multiclass_roc_png(client, iris):
    X, y = iris
    r = client.post("/train", json=train_body(X, y, "lda", evaluation={"cv": 3}))
    assert_png(client.get(f"/models/{r.json()['model_id']}/roc.png"))


def test_boundary_png_for_each_kind_of_model(client, cancer, iris):
    X, y = cancer
    kernel = train(client, X[:, :2], y, "kernel_svm", params={"random_state": 0})
    assert kernel["feature_means"] == pytest.approx(X[:, :2].mean(axis=0).tolist())
    assert kernel["feature_min"] == X[:, :2].min(axis=0).tolist()
    size = assert_png(client.get(f"/models/{kernel['model_id']}/boundary.png"))
    em = train(client, X, y, "em_svm")
    assert assert_png(client.get("/models/em_svm/boundary.png", params={"x": "area", "y": "1"}))
    r = client.get("/models/em_svm/boundary.png", params={"x": "nope"})
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "x"
    r = client.get("/models/em_svm/boundary.png", params={"x": "radius", "y": "0"})
    assert r.status_code == 422
    Xi, yi = iris
    qda = client.post("/train", json=train_body(Xi, yi, "qda")).json()
    assert assert_png(client.get(f"/models/{qda['model_id']}/boundary.png")) == size
    one = client.post("/train", json=train_body(X[:, :1], y, "lda")).json()
    assert_409(client.get(f"/models/{one['model_id']}/boundary.png"), "two features")
    assert client.get(f"/models/{UNKNOWN}/boundary.png").status_code == 404
    assert em["model_type"] == "em_svm"


def path_when_ready(client, ref: str, timeout_s: float = 300.0):
    """``GET /models/{ref}/path`` once the path computed after the store is there (409 before)."""
    deadline = time.monotonic() + timeout_s
    while (r := client.get(f"/models/{ref}/path")).status_code == 409:
        assert_409(r, "not ready")
        assert time.monotonic() < deadline, "the path never came"
        time.sleep(0.05)
    return r


def test_path_json_shrinks_with_nu_and_hits_the_model(client, cancer):
    X, y = cancer
    rec = train(client, X, y, "em_svm", params={"alpha": 2, "nu": 0.5})
    assert "path" not in rec.get("plot_data", {})  # the answer did not wait for it
    r = path_when_ready(client, "em_svm")
    assert r.status_code == 200, r.text
    path = r.json()
    nu, norm = np.array(path["nu"]), np.array(path["norm"])
    assert nu.size == 30 and np.all(np.diff(nu) > 0)
    assert nu[0] == pytest.approx(0.5e-3) and nu[-1] == pytest.approx(0.5e3)
    assert path["fitted_nu"] == pytest.approx(0.5) and nu[path["fitted_index"]] == 0.5
    assert np.all(np.diff(norm) >= -1e-6 * norm.max())  # smaller ν, more shrinkage
    assert norm[0] < 1e-2 * norm[-1]
    estimator = client.app.state.store.load(rec["model_id"])
    np.testing.assert_allclose(path["coef"][path["fitted_index"]], estimator.coef_, rtol=1e-12)
    np.testing.assert_allclose(
        np.linalg.norm(estimator.coef_std_), norm[path["fitted_index"]], rtol=1e-12
    )
    assert_png(client.get("/models/em_svm/path.png"))
    assert_png(client.get("/models/em_svm/path.png", params={"scale": "original"}))
    assert client.get("/models/em_svm/path.png", params={"scale": "bogus"}).status_code == 422
    lda = train(client, X, y, "lda")
    assert_409(client.get(f"/models/{lda['model_id']}/path"), "em_svm and ecme_svm")
    assert_409(client.get(f"/models/{lda['model_id']}/path.png"), "em_svm and ecme_svm")


def test_warm_started_path_points_equal_cold_fits(cancer):
    X, y = cancer
    warm = BayesianSVM(method="em", alpha=2, nu=1.0, warm_start=True).fit(X, y)
    warm.set_params(nu=0.1).fit(X, y)
    cold = BayesianSVM(method="em", alpha=2, nu=0.1).fit(X, y)
    assert warm.objective_ == pytest.approx(cold.objective_, rel=1e-7)  # EM's tol: 1e-8
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=1e-4)


def test_compare_alpha_two_equals_the_linear_svm(client, cancer):
    X, y = cancer
    rec = train(client, X, y, "em_svm", params={"alpha": 2, "nu": 0.7})
    path_when_ready(client, rec["model_id"])  # the comparison is stored with the path
    stored = client.app.state.store.get_record(rec["model_id"])["plot_data"]["compare"]
    assert stored["C"] == [pytest.approx(0.49)]
    estimator = client.app.state.store.load(rec["model_id"])
    for key, mine in (("coef_std", estimator.coef_std_), ("coef", estimator.coef_)):
        theirs = np.asarray(stored[key])
        assert np.max(np.abs(theirs - mine)) <= 1e-3 * np.max(np.abs(mine))
    assert_png(client.get(f"/models/{rec['model_id']}/compare.png"))
    assert_png(
        client.get(f"/models/{rec['model_id']}/compare.png", params={"scale": "standardised"})
    )
    mcmc = train(client, X, y, "mcmc_svm", params={"n_draws": 30, "burn_in": 10, "n_chains": 2})
    assert_png(client.get(f"/models/{mcmc['model_id']}/compare.png", params={"level": 0.9}))
    kernel = train(client, X, y, "kernel_svm")
    assert_409(client.get(f"/models/{kernel['model_id']}/compare.png"), "Bayesian models")
    assert client.get(f"/models/{UNKNOWN}/compare.png").status_code == 404


def test_a_nu_path_type_leaves_its_path_and_comparison_for_after_the_save(cancer):
    X, y = cancer
    types = model_types()
    em = BayesianSVM(method="em", alpha=2, nu=0.7).fit(X, y)
    now = plot_data(types["em_svm"], em, X, y, path=False)
    assert now["path"]["pending"] is True and now["compare"]["pending"] is True
    assert now["feature_stats"] == feature_stats(X)
    later = later_plot_data(types["em_svm"], em, X, y)
    assert set(later) == {"path", "compare"} == set(later_keys(types["em_svm"], em))
    assert later["compare"] == linear_comparison(em, X, y)  # the same numbers as at fit time
    assert later["path"] == regularisation_path(em, X, y)
    mcmc = types["mcmc_svm"]  # no ν path: its comparison is computed with the model
    compare = plot_data(mcmc, em, X, y, path=False)["compare"]
    assert later_keys(mcmc, em) == [] and compare == linear_comparison(em, X, y)


def test_the_record_hides_plot_data(client, cancer):
    X, y = cancer
    rec = train(client, X, y, "em_svm", evaluation={"cv": 2})
    assert "plot_data" not in rec and "roc" not in rec["metrics"]["cv"]
    assert "plot_data" not in client.get(f"/models/{rec['model_id']}").json()


def test_long_traces_are_thinned():
    draws = np.random.default_rng(0).normal(size=(2, 3 * trace_plot.MAX_TRACE_POINTS + 7))
    trace = trace_plot.CoefficientTrace(draws, "b", 0.0, -1.0, 1.0, 0.95)
    fig = Figure()
    trace_plot._draw_trace(fig, trace)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    for line, chain in zip(lines, draws, strict=True):
        assert len(line.get_xdata()) <= trace_plot.MAX_TRACE_POINTS
        np.testing.assert_array_equal(line.get_ydata(), chain[::4])


def test_boundary_title_names_only_the_margins_in_the_window():
    from service.plots.boundary import lines_drawn

    assert lines_drawn(None) == "class boundaries"
    assert lines_drawn(np.array([-3.0, 0.0, 3.0])) == "decision 0 and margins ±1"
    assert lines_drawn(np.array([-0.5, 0.5])).endswith("(the margins ±1 are outside this window)")
    one = lines_drawn(np.array([-0.5, 2.0]))
    assert one == "decision 0 and margin +1 (the other is outside this window)"


def test_compare_names_only_the_largest_coefficients(client):
    from service.plots.compare import MAX_LABELS, labelled

    svm, bayes = np.array([0.1, -600.0, 0.0, 2.0]), np.array([0.0, -550.0, 3.0, 1.0])
    assert labelled(svm, bayes).tolist() == [1, 2, 3, 0]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 30)) * np.logspace(-2, 2, 30)  # scales from 0.01 to 100
    y = (X[:, 0] / 0.01 + X[:, 29] / 100 + rng.normal(size=120) > 0).astype(int)
    body = train_body(X, y, "em_svm", params={"alpha": 2.0}, name="wide")
    assert client.post("/train", json=body).status_code == 201
    path_when_ready(client, "wide")  # the comparison is stored with the path
    assert_png(client.get("/models/wide/compare.png"))
    assert MAX_LABELS < 30


def test_the_path_routes_wait_for_the_path_computed_after_the_answer(make_client, cancer):
    """A pending path is waited for (``BSVM_PLOT_WAIT_S``); past the wait, 409 with Retry-After;
    a path its server gave up on answers at once, without Retry-After."""
    X, y = cancer
    client = make_client(plot_wait_s=20.0)
    rec = train(client, X, y, "em_svm", params={"alpha": 2, "nu": 0.5})
    computed = path_when_ready(client, "em_svm").json()
    registry = client.app.state.store.registry
    record = registry.get_record(rec["model_id"])["plot_data"]
    later = {key: record[key] for key in ("path", "compare")}
    for route in ("path", "path.png", "compare.png"):
        registry.set_plot_data(rec["model_id"], {"path": path_pending(), "compare": path_pending()})
        timer = threading.Timer(0.4, registry.set_plot_data, (rec["model_id"], later))
        start = time.monotonic()
        timer.start()
        r = client.get(f"/models/em_svm/{route}")
        timer.join()
        assert r.status_code == 200, (route, r.text)
        assert time.monotonic() - start >= 0.4
    assert client.get("/models/em_svm/path").json() == computed

    client.app.state.settings = client.app.state.settings.model_copy(update={"plot_wait_s": 0.3})
    registry.set_plot_data(rec["model_id"], {"path": path_pending(), "compare": path_pending()})
    for route in ("path", "path.png", "compare.png"):
        start = time.monotonic()
        r = client.get(f"/models/em_svm/{route}")
        assert 0.3 <= time.monotonic() - start < 10
        assert_409(r, "retry in a few seconds")
        assert r.headers["retry-after"] == str(RETRY_AFTER_S)

    client.app.state.settings = client.app.state.settings.model_copy(update={"plot_wait_s": 60})
    given_up = path_pending(time.time() - PENDING_S - 1)
    registry.set_plot_data(rec["model_id"], {"path": given_up, "compare": given_up})
    start = time.monotonic()
    r = client.get("/models/em_svm/path.png")
    assert time.monotonic() - start < 10  # not the 60 s wait
    assert_409(r, "server stopped")
    assert "retry-after" not in r.headers
