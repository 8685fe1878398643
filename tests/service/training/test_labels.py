"""Labels of POST /train: whole JSON numbers are integers, other floats one clear error; CSV too."""

from __future__ import annotations

import numpy as np
import pytest

X8 = [
    [0.0, 1.0],
    [1.0, 0.0],
    [2.0, 2.0],
    [3.0, 1.0],
    [0.5, 1.5],
    [1.5, 0.5],
    [2.5, 2.0],
    [3.5, 1.0],
]


def train(client, y: list, **extra):
    return client.post("/train", json={"model_type": "lda", "X": X8, "y": y, **extra})


def test_whole_json_numbers_are_integer_labels(client):
    r = train(client, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert r.status_code == 201, r.text
    assert r.json()["classes"] == [0, 1]
    same = train(client, [0, 1, 0, 1, 0, 1, 0, 1]).json()
    body = {"X": X8, "outputs": ["label", "decision"]}
    a = client.post("/predict", json={**body, "model": r.json()["model_id"]}).json()
    b = client.post("/predict", json={**body, "model": same["model_id"]}).json()
    assert a["predictions"] == b["predictions"] and a["decision_function"] == b["decision_function"]
    assert all(type(p) is int for p in a["predictions"])


def test_mixed_ints_and_whole_floats_are_one_integer_type(client):
    r = train(client, [0, 1.0, 2, 0.0, 1, 2.0, 0, 1])
    assert r.status_code == 201, r.text
    assert r.json()["classes"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("bad", "shown"),
    [(1.5, "1.5"), (-0.25, "-0.25"), (True, "true"), (None, "null"), ({"a": 1}, "an object")],
)
def test_a_label_that_is_neither_is_one_error_on_y(client, bad, shown):
    y = [0, 1] * 150
    y[7] = bad
    r = client.post(
        "/train", json={"model_type": "lda", "X": [[float(i), 1.0] for i in range(300)], "y": y}
    )
    assert r.status_code == 422, r.text
    assert r.json()["details"] == [
        {"field": "y", "problem": f"labels must be integers or strings; {shown} is neither"}
    ]


def test_all_fractional_labels_give_one_error_not_one_per_row(client):
    y = [0.5, 1.5] * 150
    r = client.post(
        "/train", json={"model_type": "lda", "X": [[float(i), 1.0] for i in range(300)], "y": y}
    )
    assert r.status_code == 422
    assert r.json()["details"] == [
        {"field": "y", "problem": "labels must be integers or strings; 0.5 is neither"}
    ]


def csv_of(labels: list[str]) -> str:
    rows = [f"{a},{b},{label}" for (a, b), label in zip(X8, labels, strict=True)]
    return "\n".join(["a,b,t", *rows]) + "\n"


@pytest.mark.parametrize(
    ("labels", "classes"),
    [
        (["0.0", "1.0"] * 4, [0, 1]),
        (["0", "1"] * 4, [0, 1]),
        (["-1", "+1"] * 4, [-1, 1]),
        (["1.00", "2"] * 4, [1, 2]),
        (["0.5", "1"] * 4, ["0.5", "1"]),
        (["no", "yes"] * 4, ["no", "yes"]),
        (["1e0", "2"] * 4, ["1e0", "2"]),
    ],
)
def test_csv_label_columns_of_whole_numbers_are_integers(client, labels, classes):
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "t"},
        content=csv_of(labels),
        headers={"Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    assert r.json()["classes"] == classes
    assert [type(c) for c in r.json()["classes"]] == [type(c) for c in classes]


def test_csv_whole_float_labels_predict_as_integers(client):
    r = client.post(
        "/train",
        params={"model_type": "lda", "target": "t", "name": "floats"},
        content=csv_of(["0.0", "1.0"] * 4),
        headers={"Content-Type": "text/csv"},
    )
    assert r.status_code == 201, r.text
    out = client.post("/predict", json={"model": "floats", "X": X8}).json()
    assert set(out["predictions"]) <= {0, 1} and np.asarray(out["predictions"]).dtype.kind == "i"
