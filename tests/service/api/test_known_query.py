"""An unknown query parameter is a 422 naming it, on every route of the OpenAPI document."""

from __future__ import annotations

import re

import pytest

UNKNOWN = "zz_unknown"


def test_every_route_rejects_an_unknown_query_parameter(client):
    paths = client.get("/openapi.json").json()["paths"]
    checked = 0
    for path, operations in paths.items():
        url = re.sub(r"\{[^}]+\}", "x", path)
        for method in operations:
            r = client.request(
                method.upper(), url, params={UNKNOWN: "1"}, json={} if method != "get" else None
            )
            assert r.status_code == 422, (method, path, r.text)
            assert [d["field"] for d in r.json()["details"]] == [UNKNOWN], (method, path)
            checked += 1
    assert checked > 30


def test_the_answer_names_the_closest_and_the_known(client):
    details = client.get("/models", params={"nmae": "x"}).json()["details"]
    assert details[0]["field"] == "nmae"
    assert details[0]["problem"].startswith("unknown; did you mean 'name'? allowed: alias, limit")


@pytest.mark.parametrize("query", [{"model": "m", "levle": "0.9"}, {"outputz": "predictions"}])
def test_predict_checks_its_query_before_its_body(client, query):
    r = client.post(
        "/predict", params=query, content=b"a\n1\n", headers={"content-type": "text/csv"}
    )
    assert r.status_code == 422
    assert [d["field"] for d in r.json()["details"]] == [k for k in query if k != "model"]


def test_known_parameters_still_work(client):
    assert client.get("/models", params={"limit": 1}).status_code == 200
    assert client.get("/health/live").status_code == 200
