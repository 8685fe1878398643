"""POST /train: JSON and CSV bodies, held-out evaluation, background jobs, and every 422."""

from __future__ import annotations

import io

import numpy as np
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, roc_auc_score
from sklearn.model_selection import train_test_split

from tests.service.conftest import train_body, wait_for_job

RECORD_FIELDS = {
    "model_id", "name", "version", "aliases", "model_type", "params", "classes", "n_features",
    "feature_names", "training", "metrics", "created_at", "random_state", "artifact_sha256",
    "library_versions",
}  # fmt: skip


def to_csv(X: np.ndarray, y: np.ndarray, names: list[str], target: str = "species") -> str:
    out = io.StringIO()
    out.write(",".join([*names, target]) + "\n")
    for row, label in zip(X, y, strict=True):
        out.write(",".join([*map(repr, row.tolist()), str(label)]) + "\n")
    return out.getvalue()


def test_json_train_answers_201_with_the_full_record(client, iris):
    X, y = iris
    names = ["sl", "sw", "pl", "pw"]
    r = client.post("/train", json=train_body(X, y, feature_names=names, name="iris"))
    assert r.status_code == 201, r.text
    rec = r.json()
    assert rec.keys() >= RECORD_FIELDS
    assert rec["name"] == "iris" and rec["version"] == 1 and rec["model_type"] == "lda"
    assert rec["params"] == {"priors": None, "tol": 1e-4}
    assert rec["classes"] == ["setosa", "versicolor", "virginica"]
    assert rec["n_features"] == 4 and rec["feature_names"] == names
    assert rec["training"]["n_samples"] == 150 and rec["training"]["seconds"] >= 0
    reference = LinearDiscriminantAnalysis().fit(X, y)
    assert rec["metrics"]["train"]["accuracy"] == pytest.approx(reference.score(X, y), abs=1e-12)
    assert rec["metrics"]["heldout"] is None
    assert client.get(f"/models/{rec['model_id']}").json() == rec


def test_name_defaults_to_the_model_type(client, iris):
    X, y = iris
    assert client.post("/train", json=train_body(X, y, "qda")).json()["name"] == "qda"


def test_heldout_metrics_match_an_independent_computation(client, iris):
    X, y = iris
    binary = y != "setosa"
    Xb, yb = X[binary], y[binary]
    body = train_body(Xb, yb, evaluation={"test_fraction": 0.3, "random_state": 7})
    rec = client.post("/train", json=body).json()
    X_tr, X_te, y_tr, y_te = train_test_split(Xb, yb, test_size=0.3, random_state=7, stratify=yb)
    ref = LinearDiscriminantAnalysis().fit(X_tr, y_tr)
    pred = ref.predict(X_te)
    held = rec["metrics"]["heldout"]
    assert held["n_samples"] == len(y_te) and rec["training"]["n_samples"] == len(y_tr)
    assert held["test_fraction"] == 0.3 and held["random_state"] == 7
    assert held["accuracy"] == pytest.approx(accuracy_score(y_te, pred))
    pos = "virginica"
    assert held["precision"] == pytest.approx(precision_score(y_te, pred, pos_label=pos))
    assert held["recall"] == pytest.approx(recall_score(y_te, pred, pos_label=pos))
    assert held["f1"] == pytest.approx(f1_score(y_te, pred, pos_label=pos))
    auc = roc_auc_score(y_te == pos, ref.decision_function(X_te))
    assert held["roc_auc"] == pytest.approx(auc)


def test_multiclass_metrics_are_macro(client, iris):
    X, y = iris
    body = train_body(X, y, evaluation={"test_fraction": 0.4, "random_state": 1})
    held = client.post("/train", json=body).json()["metrics"]["heldout"]
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.4, random_state=1, stratify=y)
    ref = LinearDiscriminantAnalysis().fit(X_tr, y_tr)
    assert held["average"] == "macro"
    assert held["f1"] == pytest.approx(f1_score(y_te, ref.predict(X_te), average="macro"))
    auc = roc_auc_score(y_te, ref.predict_proba(X_te), multi_class="ovr", average="macro")
    assert held["roc_auc"] == pytest.approx(auc, abs=1e-9)


def test_csv_train_equals_json_train(client, iris):
    X, y = iris
    names = ["sl", "sw", "pl", "pw"]
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "species", "name": "csv"},
        content=to_csv(X, y, names),
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    rec = r.json()
    assert rec["feature_names"] == names and rec["name"] == "csv"
    assert rec["classes"] == ["setosa", "versicolor", "virginica"]
    json_rec = client.post("/train", json=train_body(X, y)).json()
    pred = {"X": X.tolist(), "outputs": ["probability"]}
    p_csv = client.post("/predict", json={**pred, "model": rec["model_id"]}).json()
    p_json = client.post("/predict", json={**pred, "model": json_rec["model_id"]}).json()
    assert p_csv["probabilities"] == p_json["probabilities"]


def test_csv_integer_labels_stay_integers(client, iris):
    X, y = iris
    labels = np.unique(y, return_inverse=True)[1]
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "t", "params": '{"tol": 0.001}'},
        content=to_csv(X, labels, ["a", "b", "c", "d"], target="t"),
        headers={"content-type": "text/csv; charset=utf-8"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["classes"] == [0, 1, 2] and r.json()["params"]["tol"] == 0.001


@pytest.mark.parametrize(
    ("csv_text", "params", "field"),
    [
        ("a,b,y\n1,nan,x\n2,3,z\n", {"model_type": "lda", "target": "y"}, "X[0][1]"),
        ("a,b,y\n1,inf,x\n2,3,z\n", {"model_type": "lda", "target": "y"}, "X[0][1]"),
        ("a,b,y\n1,hello,x\n2,3,z\n", {"model_type": "lda", "target": "y"}, "X[0][1]"),
        ("a,b,y\n1,2\n2,3,z\n", {"model_type": "lda", "target": "y"}, "X[0]"),
        ("a,b,y\n1,2,x\n2,3,z\n", {"model_type": "lda", "target": "nope"}, "target"),
        ("a,b,y\n1,2,x\n2,3,z\n", {"target": "y"}, "model_type"),
        ("a,b,y\n", {"model_type": "lda", "target": "y"}, "body"),
    ],
)
def test_bad_csv_is_422_naming_the_field(client, csv_text, params, field):
    r = client.post("/train", params=params, content=csv_text, headers={"content-type": "text/csv"})
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "INVALID_INPUT"
    assert field in [d["field"] for d in r.json()["details"]]


def csv_train(client, iris, **query):
    X, y = iris
    params = {"model_type": "lda", "target": "species", **query}
    content = to_csv(X, y, ["sl", "sw", "pl", "pw"])
    return client.post(
        "/train", params=params, content=content, headers={"content-type": "text/csv"}
    )


def test_csv_train_reaches_cross_validation_and_the_split(client, iris):
    rec = csv_train(client, iris, cv="3", test_fraction="0.2").json()
    assert rec["metrics"]["cv"]["k"] == 3 and rec["metrics"]["heldout"]["n_samples"] == 30
    rec = csv_train(client, iris, evaluation='{"cv": 4, "random_state": 7}').json()
    assert rec["metrics"]["cv"]["k"] == 4 and rec["metrics"]["cv"]["random_state"] == 7


def test_csv_train_reaches_search_and_every_other_field(client, iris):
    r = csv_train(
        client,
        iris,
        model_type="linear_svm",
        search='{"C": [0.1, 1.0]}',
        search_scoring="f1",
        evaluation='{"cv": 3, "random_state": 0}',
        tags='{"team": "iris"}',
        description="from CSV",
        preprocess="none",
        name="csv-search",
        background="false",
    )
    assert r.status_code == 201, r.text
    rec = r.json()
    assert rec["search"]["scoring"] == "f1" and rec["search"]["k"] == 3
    assert rec["tags"] == {"team": "iris"} and rec["description"] == "from CSV"


def test_csv_train_query_covers_the_json_body():
    from service.schemas.train import TrainRequestBase
    from service.wire.csv_bodies import TRAIN_QUERY

    rows = {"X", "y", "feature_names", "data"}  # a CSV body is the rows: no data by reference
    assert set(TrainRequestBase.model_fields) - rows | {"model_type", "params"} <= set(TRAIN_QUERY)


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({"cv": "3", "evaluation": '{"cv": 3}'}, "cv", "also given in evaluation"),
        ({"evaluation": "{cv: 3}"}, "evaluation", "must be a JSON object"),
        ({"cvv": "3"}, "cvv", "did you mean 'cv'?"),
        ({"search": '{"Cc": [1]}', "model_type": "linear_svm"}, "search.Cc", "did you mean 'C'?"),
    ],
)
def test_bad_csv_query_is_422_naming_it(client, iris, query, field, words):
    r = csv_train(client, iris, **query)
    assert r.status_code == 422, r.text
    assert words in {d["field"]: d["problem"] for d in r.json()["details"]}[field]


def test_csv_query_on_a_json_training_is_422(client, iris):
    X, y = iris
    r = client.post("/train", params={"cv": "3"}, json=train_body(X, y))
    assert r.status_code == 422
    assert r.json()["details"][0]["field"] == "cv"


def test_non_utf8_csv_is_400(client):
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "y"},
        content=b"a,y\n\xff\xfe,1\n",
        headers={"content-type": "text/csv"},
    )
    assert r.status_code == 400 and r.json()["code"] == "BAD_REQUEST"


X4 = [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 1.0]]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"X": [[0.0, 1.0], [1.0], [2.0, 2.0], [3.0, 1.0]]}, "X[1]"),
        ({"y": ["a", "a", "a", "a"]}, "y"),
        ({"y": ["a", "b", "a"]}, "y"),
        ({"y": ["a", 1, "a", 1]}, "y"),
        ({"X": []}, "X"),
        ({"feature_names": ["only_one"]}, "feature_names"),
        ({"params": {"reg_param": 2.0}}, "params.reg_param"),
        ({"params": {"bogus": 1}}, "params.bogus"),
        ({"params": {"priors": [0.2, 0.3]}}, "params.priors"),
        ({"params": {"priors": [1.0]}}, "params.priors"),
        ({"model_type": "no_such_type"}, "model_type"),
        ({"evaluation": {"test_fraction": 0.9}}, "evaluation.test_fraction"),
        ({"evaluation": {"test_fraction": 0.01}}, "evaluation.test_fraction"),
    ],
)
def test_invalid_train_requests_are_422_naming_the_field(client, change, field):
    body = {"model_type": "qda", "X": X4, "y": ["a", "b", "a", "b"], **change}
    r = client.post("/train", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "INVALID_INPUT"
    named = [d["field"] + " " + d["problem"] for d in r.json()["details"]]
    assert any(field in text for text in named), r.json()


def test_nan_in_json_is_422(client):
    text = '{"model_type": "lda", "X": [[NaN, 1], [1, 2], [2, 2], [3, 1]], "y": [0, 1, 0, 1]}'
    r = client.post("/train", content=text, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "X[0][0]"


@pytest.mark.parametrize(
    ("limits", "body", "field"),
    [
        ({"max_rows": 3}, {"X": X4, "y": [0, 1, 0, 1]}, "X"),
        ({"max_features": 1}, {"X": X4, "y": [0, 1, 0, 1]}, "X"),
        ({"max_classes": 2}, {"X": X4 * 2, "y": [0, 1, 2, 0, 1, 2, 0, 1]}, "y"),
    ],
)
def test_limits_are_422(make_client, limits, body, field):
    client = make_client(**limits)
    r = client.post("/train", json={"model_type": "lda", **body})
    assert r.status_code == 422 and r.json()["details"][0]["field"] == field


def test_background_train_answers_202_and_the_job_finishes(client, iris):
    X, y = iris
    r = client.post("/train", json=train_body(X, y, background=True, name="bg"))
    assert r.status_code == 202, r.text
    job_id = r.json()["job_id"]
    assert r.headers["location"] == f"/jobs/{job_id}"
    job = wait_for_job(client, job_id)
    assert job["status"] == "succeeded" and job["progress"] == 1.0
    assert client.get(f"/models/{job['model_id']}").json()["name"] == "bg"


def test_prefer_respond_async_answers_202(client, iris):
    X, y = iris
    r = client.post("/train", json=train_body(X, y), headers={"Prefer": "respond-async"})
    assert r.status_code == 202
    assert wait_for_job(client, r.json()["job_id"])["status"] == "succeeded"


def test_validation_errors_come_before_any_job(client):
    r = client.post(
        "/train", json={"model_type": "lda", "X": X4, "y": [0, 0, 0, 0], "background": True}
    )
    assert r.status_code == 422


def test_openapi_shows_each_registered_type_with_bounds(client):
    doc = client.get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    assert schemas["QDAParams"]["properties"]["reg_param"]["maximum"] == 1.0
    body = doc["paths"]["/train"]["post"]["requestBody"]["content"]
    assert {"application/json", "text/csv"} <= body.keys()
    mapping = body["application/json"]["schema"]["discriminator"]["mapping"]
    assert mapping.keys() == client.app.state.model_types.keys() >= {"lda", "qda"}


def test_iteration_caps_follow_the_settings(make_client, iris):
    X, y = iris
    client = make_client(max_iter=50)
    assert "linear_svm" in client.app.state.model_types
    r = client.post("/train", json=train_body(X, y, "linear_svm", params={"max_iter": 51}))
    assert r.status_code == 422 and r.json()["details"][0]["field"] == "params.max_iter"


def test_hard_margin_on_overlapping_classes_is_422_not_500(client, iris):
    X, y = iris
    assert "kernel_svm" in client.app.state.model_types
    body = train_body(
        X, y, "kernel_svm", params={"C": "inf", "kernel": "linear", "max_iter": 20000}
    )
    r = client.post("/train", json=body)
    assert r.status_code == 422, r.text
    assert "separable" in r.json()["error"]
    assert client.get("/models").json()["total"] == 0
