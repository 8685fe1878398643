"""Validation wording where newcomers trip: unknown keys, C on a Bayesian model, model_type,
an empty body, a union's problems as one."""

from __future__ import annotations

import pytest

from service.errors import unknown_name
from service.schemas.train import TrainRequest
from service.wire.validation import required_fields

ROWS = {"X": [[1.0, 2.0], [2.0, 1.0]], "y": [0, 1]}


def problems(response) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {d["field"]: d["problem"] for d in response.json()["details"]}


def test_unknown_param_names_the_closest_and_the_allowed(client):
    body = {"model_type": "kernel_svm", "params": {"C": 1, "gama": 0.1}, **ROWS}
    problem = problems(client.post("/train", json=body))["params.gama"]
    assert "did you mean 'gamma'?" in problem
    assert "allowed: C, cache_mb, coef0, degree, gamma, kernel" in problem


@pytest.mark.parametrize("model_type", ["em_svm", "ecme_svm", "mcmc_svm", "spike_slab_svm"])
def test_c_on_a_bayesian_model_explains_nu(client, model_type):
    body = {"model_type": model_type, "params": {"C": 1.0}, **ROWS}
    assert "nu = sqrt(C)" in problems(client.post("/train", json=body))["params.C"]


def test_misspelt_model_type_is_reported_on_model_type_with_a_close_match(client):
    found = problems(client.post("/train", json={"model_type": "kernal_svm", **ROWS}))
    assert list(found) == ["model_type"]
    assert "did you mean 'kernel_svm'?" in found["model_type"]


def test_missing_model_type_lists_the_types(client):
    found = problems(client.post("/train", json=ROWS))
    assert found["model_type"].startswith("is required; one of ecme_svm, em_svm, kernel_svm")


def test_empty_body_says_what_to_send(client):
    headers = {"Content-Type": "application/json"}
    found = problems(client.post("/train", content=b"", headers=headers))
    assert found == {
        "body": "the body is empty: send a JSON object with model_type, X, y (or data in place of the rows)"
    }
    found = problems(client.post("/predict", content=b"", headers=headers))
    assert found == {"body": "the body is empty: send a JSON object with model, X"}


def test_a_union_reads_as_one_problem_without_internal_names(client):
    body = {"model_type": "kernel_svm", "params": {"gamma": "fast"}, **ROWS}
    response = client.post("/train", json=body)
    assert problems(response) == {
        "params.gamma": "Input should be 'scale' or 'auto', or a valid number, unable to parse "
        "string as a number"
    }
    assert "constrained" not in response.text


def test_unknown_keys_at_every_level(client):
    body = {"model_type": "lda", "evaluation": {"cvv": 2}, "nmae": "x", **ROWS}
    found = problems(client.post("/train", json=body))
    assert "did you mean 'cv'?" in found["evaluation.cvv"]
    assert "did you mean 'name'?" in found["nmae"]
    predict = problems(client.post("/predict", json={"modle": "x", "X": [[1.0]]}))
    assert "did you mean 'model'?" in predict["modle"]


def test_unknown_name_wording():
    assert unknown_name("C", ["c", "nu"]) == "unknown; did you mean 'c'? allowed: c, nu"
    assert unknown_name("zzz", ["alpha"]) == "unknown; allowed: alpha"
    assert unknown_name("C", ["nu"], hint="use nu") == "use nu"
    assert required_fields(TrainRequest) == ["model_type", "X", "y"]
