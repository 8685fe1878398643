"""One-vs-one Bayesian models through the API: posterior rows per pair, intervals per pair (JSON
and CSV), trace plots chosen by pair, the comparison and path plots, and refusals naming fields."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
from sklearn.datasets import make_classification

from bsvm_core import LinearSVM
from tests.service.conftest import train_body

MCMC = {"alpha": 2.0, "nu": 1.0, "n_draws": 200, "burn_in": 50, "n_chains": 2, "random_state": 0,
        "multiclass": "ovo"}  # fmt: skip
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def four() -> tuple[np.ndarray, np.ndarray]:
    """Four classes (six pairs: more pairs than classes), string labels."""
    X, y = make_classification(300, 4, n_informative=4, n_redundant=0, n_classes=4,
                               n_clusters_per_class=1, class_sep=2.0, random_state=0)  # fmt: skip
    return X, np.array(["a", "b", "c", "d"])[y]


PAIRS = [["b", "a"], ["c", "a"], ["d", "a"], ["c", "b"], ["d", "b"], ["d", "c"]]


def test_mcmc_ovo_posterior_intervals_and_trace(client, four) -> None:
    X, y = four
    r = client.post("/train", json=train_body(X, y, "mcmc_svm", name="four", params=MCMC))
    assert r.status_code == 201, r.text
    assert r.json()["params"]["multiclass"] == "ovo"
    model = client.app.state.store.load(r.json()["model_id"])
    assert [[model.classes_[p], model.classes_[n]] for p, n in model.binary_problems_] == PAIRS

    rows = client.get("/models/four/posterior").json()["coefficients"]
    assert len(rows) == 6 * 5
    assert [[row["class"], row["versus"]] for row in rows[::5]] == PAIRS

    body = {"model": "four", "X": X[:7].tolist(), "outputs": ["predictions", "intervals"]}
    answer = client.post("/predict", json=body).json()
    assert answer["predictions"] == model.predict(X[:7]).tolist()
    intervals = answer["intervals"]
    assert intervals["problems"] == PAIRS
    lower, upper = np.array(intervals["lower"]), np.array(intervals["upper"])
    assert lower.shape == upper.shape == (7, 6) and np.all(lower < upper)
    expected = model.predict_interval(X[:7], level=0.95)
    np.testing.assert_allclose(lower, expected[0], rtol=1e-12)

    csv = client.post("/predict", json=body, headers={"Accept": "text/csv"})
    assert csv.status_code == 200, csv.text
    table = pcsv.read_csv(pa.py_buffer(csv.content)).to_pydict()
    names = [f"{a}_vs_{b}" for a, b in PAIRS]
    assert list(table) == [
        "label",
        *[f"interval_lower_{n}" for n in names],
        *[f"interval_upper_{n}" for n in names],
    ]
    np.testing.assert_allclose(table["interval_upper_d_vs_c"], upper[:, 5], rtol=1e-12)

    plot = client.get("/models/four/posterior/plot",
                      params={"coef": "x1", "class": "c", "versus": "b"})  # fmt: skip
    assert plot.status_code == 200 and plot.content.startswith(PNG), plot.text
    swapped = client.get("/models/four/posterior/plot",
                         params={"coef": "x1", "class": "b", "versus": "c"})  # fmt: skip
    assert swapped.status_code == 200 and swapped.content == plot.content  # either order
    missing = client.get("/models/four/posterior/plot", params={"coef": "x1", "class": "c"})
    assert missing.status_code == 422
    assert missing.json()["details"][0]["field"] == "versus"
    assert "d vs c" in missing.json()["details"][0]["problem"]
    unknown = client.get("/models/four/posterior/plot",
                         params={"coef": "x1", "class": "c", "versus": "c"})  # fmt: skip
    assert unknown.status_code == 422 and "not a pair" in unknown.json()["details"][0]["problem"]


def test_em_ovo_comparison_is_per_pair_and_plots_draw(client, iris) -> None:
    X, y = iris
    params = {"alpha": 2.0, "nu": 1.0, "multiclass": "ovo"}
    r = client.post("/train", json=train_body(X, y, "em_svm", name="iris-ovo", params=params))
    assert r.status_code == 201, r.text
    model = client.app.state.store.load(r.json()["model_id"])
    rows = client.get("/models/iris-ovo/posterior").json()["coefficients"]
    assert [(row["class"], row["versus"]) for row in rows[::5]] == [
        ("versicolor", "setosa"),
        ("virginica", "setosa"),
        ("virginica", "versicolor"),
    ]
    deadline_path = client.get("/models/iris-ovo/path")  # waits for the path (BSVM_PLOT_WAIT_S)
    assert deadline_path.status_code == 200, deadline_path.text
    path = deadline_path.json()
    assert path["classes"] == ["versicolor", "virginica", "virginica"]
    assert path["versus"] == ["setosa", "setosa", "versicolor"]
    assert np.asarray(path["coef"]).shape[1:] == (3, 4)
    compare = client.get("/models/iris-ovo/compare.png")
    assert compare.status_code == 200 and compare.content.startswith(PNG)
    assert client.get("/models/iris-ovo/path.png").content.startswith(PNG)
    # the comparison's linear SVM of the last pair, on that pair's rows only: α = 2 is its mode
    record = client.app.state.store.registry.get_record(r.json()["model_id"])
    pair = np.isin(y, ["versicolor", "virginica"])
    Z = (X - model.mean_) / model.scale_
    svm = LinearSVM(C=1.0, tol=1e-8).fit(Z[pair], (y[pair] == "virginica").astype(int))
    stored = np.asarray(record["plot_data"]["compare"]["coef_std"])
    np.testing.assert_allclose(stored[2], svm.coef_.ravel(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(model.coef_std_[2], stored[2], atol=1e-4)


def test_versus_is_refused_where_it_does_not_apply(client, iris) -> None:
    X, y = iris
    params = {**MCMC, "multiclass": "ovr"}
    r = client.post("/train", json=train_body(X, y, "mcmc_svm", name="iris-ovr", params=params))
    assert r.status_code == 201, r.text
    answer = client.get("/models/iris-ovr/posterior/plot",
                        params={"coef": "x1", "class": "setosa", "versus": "virginica"})  # fmt: skip
    assert answer.status_code == 422 and answer.json()["details"][0]["field"] == "versus"
    rows = client.get("/models/iris-ovr/posterior").json()["coefficients"]
    assert all("versus" not in row or row["versus"] is None for row in rows)
    bad = client.post("/train", json=train_body(X, y, "em_svm", params={"multiclass": "all"}))
    assert bad.status_code == 422 and bad.json()["details"][0]["field"] == "params.multiclass"
