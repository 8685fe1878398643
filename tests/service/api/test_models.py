"""/models: paging, filter, record, delete, aliases, posterior, restart."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_breast_cancer

from tests.service.conftest import train_body


def train_three(client, iris) -> list[dict]:
    """Versions 1 and 2 of LDA ``a``, then QDA ``b``."""
    X, y = iris
    return [
        client.post("/train", json=train_body(X, y, t, name=n)).json()
        for t, n in (("lda", "a"), ("lda", "a"), ("qda", "b"))
    ]


@pytest.fixture()
def three(client, iris) -> list[dict]:
    """``train_three`` on an app of the test's own (its tests list, delete and move aliases)."""
    return train_three(client, iris)


@pytest.fixture(scope="module")
def shared_three(module_client, iris) -> list[dict]:
    """``train_three`` on the module's app, for tests that change nothing."""
    return train_three(module_client, iris)


def test_list_is_newest_first_paged_and_filtered(client, three):
    page = client.get("/models").json()
    assert page["total"] == 3 and [m["model_id"] for m in page["items"]] == [
        m["model_id"] for m in reversed(three)
    ]
    first = client.get("/models", params={"limit": 2, "offset": 0}).json()
    second = client.get("/models", params={"limit": 2, "offset": 2}).json()
    assert len(first["items"]) == 2 and len(second["items"]) == 1 and second["total"] == 3
    paged = client.get("/models", params={"page": 2, "page_size": 2}).json()
    assert paged["items"] == second["items"] and (paged["limit"], paged["offset"]) == (2, 2)
    named = client.get("/models", params={"name": "a"}).json()
    assert named["total"] == 2 and {m["version"] for m in named["items"]} == {1, 2}


def test_lists_are_compact_unless_full_is_asked_for(module_client, shared_three, iris):
    X, y = iris
    body = train_body(X, y, name="cv-headline", evaluation={"cv": 3})
    cv_model = module_client.post("/train", json=body).json()
    compact = module_client.get("/models", params={"limit": 1}).json()["items"][0]
    assert compact == {
        "model_id": cv_model["model_id"],
        "name": "cv-headline",
        "version": 1,
        "aliases": [],
        "model_type": "lda",
        "created_at": cv_model["created_at"],
        "accuracy": cv_model["metrics"]["cv"]["mean"]["accuracy"],
        "accuracy_on": "cv",
    }
    (train_only,) = module_client.get("/models/b/versions").json()["items"]
    assert train_only["accuracy_on"] == "train"
    assert train_only["accuracy"] == shared_three[2]["metrics"]["train"]["accuracy"]
    full = module_client.get("/models", params={"view": "full", "name": "b"}).json()["items"]
    assert full == [module_client.get("/models/b").json()]
    versions = module_client.get("/models/a/versions", params={"view": "full"}).json()["items"]
    assert [v["params"] for v in versions] == [shared_three[1]["params"], shared_three[0]["params"]]
    assert module_client.get("/models", params={"view": "all"}).status_code == 422


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"offset": -1}, {"page": 0}, {"name": "../x"}, {"page_size": 5000}]
)
def test_bad_list_queries_are_422(module_client, params):
    assert module_client.get("/models", params=params).status_code == 422


def test_get_and_delete(client, three):
    model_id = three[0]["model_id"]
    assert client.get(f"/models/{model_id}").json()["name"] == "a"
    assert client.delete(f"/models/{model_id}").status_code == 204
    assert client.get(f"/models/{model_id}").status_code == 404
    assert client.delete(f"/models/{model_id}").status_code == 404
    assert client.get("/models").json()["total"] == 2


@pytest.mark.parametrize("bad", ["..%2F..%2Fetc", "m_" + "0" * 40, "x" * 300, "M_ABC"])
def test_malformed_ids_are_422(module_client, bad):
    assert module_client.get(f"/models/{bad}").status_code in (404, 422)
    assert module_client.get(f"/models/{bad}").json()["code"] in ("INVALID_INPUT", "NOT_FOUND")


def test_unknown_well_formed_id_is_404(module_client):
    r = module_client.get("/models/m_" + "0" * 32)
    assert r.status_code == 404 and r.json()["code"] == "NOT_FOUND"


def test_alias_points_at_a_version(client, three):
    r = client.put("/models/by-name/a/aliases/stable", json={"version": 1})
    assert r.status_code == 200 and r.json()["aliases"] == ["stable"]
    assert r.json()["model_id"] == three[0]["model_id"]
    r = client.put("/models/by-name/a/aliases/stable", json={"version": 2})
    assert r.json()["model_id"] == three[1]["model_id"]
    assert client.get(f"/models/{three[0]['model_id']}").json()["aliases"] == []


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/models/by-name/a/aliases/stable", {"version": 9}, 404),
        ("/models/by-name/zzz/aliases/stable", {"version": 1}, 404),
        ("/models/by-name/a/aliases/1bad", {"version": 1}, 422),
        ("/models/by-name/a/aliases/stable", {"version": 0}, 422),
        ("/models/by-name/a/aliases/stable", {"version": 1, "extra": 1}, 422),
    ],
)
def test_bad_alias_updates(module_client, shared_three, path, body, status):
    assert module_client.put(path, json=body).status_code == status


def test_posterior_of_a_non_bayesian_model_is_409(module_client, shared_three):
    r = module_client.get(f"/models/{shared_three[0]['model_id']}/posterior", params={"level": 0.9})
    assert r.status_code == 409
    assert "no posterior" in r.json()["error"] and "Bayesian" in r.json()["error"]
    assert (
        module_client.get(f"/models/{shared_three[0]['model_id']}/posterior?level=1.5").status_code
        == 422
    )


def test_a_restart_finds_every_model(make_client, iris):
    X, y = iris
    first = make_client()
    rec = first.post("/train", json=train_body(X, y, name="keep")).json()
    first.put("/models/by-name/keep/aliases/prod", json={"version": 1})
    before = first.post(
        "/predict", json={"model": "keep@prod", "X": X.tolist(), "outputs": ["probability"]}
    ).json()
    second = make_client()
    assert second.get(f"/models/{rec['model_id']}").json()["aliases"] == ["prod"]
    after = second.post(
        "/predict", json={"model": "keep@prod", "X": X.tolist(), "outputs": ["probability"]}
    ).json()
    assert after == before


def bayes_body(model_type: str, **params) -> dict:
    X, y = load_breast_cancer(return_X_y=True)
    names = ["radius", "texture", "perimeter"]
    return {"model_type": model_type, "X": X[:, :3].tolist(), "y": y.tolist(),
            "feature_names": names, "params": params}  # fmt: skip


def test_posterior_of_an_mcmc_model(module_client):
    body = bayes_body("mcmc_svm", n_draws=200, burn_in=50, n_chains=2, random_state=0)
    rec = module_client.post("/train", json=body)
    assert rec.status_code == 201, rec.json()
    model_id = rec.json()["model_id"]
    r = module_client.get(f"/models/{model_id}/posterior", params={"level": 0.8})
    assert r.status_code == 200, r.text
    post = r.json()
    assert post["level"] == 0.8 and post["scale"] == "original"
    rows = {c["name"]: c for c in post["coefficients"]}
    assert set(rows) == {"intercept", "radius", "texture", "perimeter"}
    for row in rows.values():
        assert row["lower"] < row["mean"] < row["upper"] and row["sd"] > 0 and row["ess"] > 0
    wide = module_client.get(f"/models/{model_id}/posterior", params={"level": 0.99}).json()
    wide_rows = {c["name"]: c for c in wide["coefficients"]}
    assert all(wide_rows[k]["lower"] <= rows[k]["lower"] for k in rows)
    std = module_client.get(
        f"/models/{model_id}/posterior", params={"scale": "standardised"}
    ).json()
    assert std["scale"] == "standardised" and std["coefficients"] != post["coefficients"]


def test_posterior_of_a_spike_slab_model_has_inclusion_probabilities(module_client):
    body = bayes_body(
        "spike_slab_svm", alpha=2, n_draws=150, burn_in=50, n_chains=2, random_state=0
    )
    rec = module_client.post("/train", json=body)
    assert rec.status_code == 201, rec.json()
    post = module_client.get(f"/models/{rec.json()['model_id']}/posterior").json()
    rows = {c["name"]: c for c in post["coefficients"]}
    assert rows["intercept"]["inclusion_prob"] == 1.0
    model = module_client.app.state.store.load(rec.json()["model_id"])
    for j, name in enumerate(["radius", "texture", "perimeter"]):
        assert 0.0 <= rows[name]["inclusion_prob"] <= 1.0
        assert rows[name]["inclusion_prob"] == pytest.approx(model.inclusion_prob_.ravel()[j])


@pytest.mark.parametrize(
    ("params", "field"),
    [({"alpha": 1.5}, "alpha"), ({"learn_nu": True}, "learn_nu"), ({"n_chains": 99}, "n_chains")],
)
def test_bad_bayesian_params_are_422_naming_the_field(module_client, params, field):
    r = module_client.post("/train", json=bayes_body("spike_slab_svm", **params))
    assert r.status_code == 422
    assert any(field in d["field"] for d in r.json()["details"]), r.json()


def test_record_params_are_those_of_the_model_type(module_client):
    em = module_client.post("/train", json=bayes_body("em_svm", alpha=2.0)).json()["params"]
    assert em["method"] == "em" and em["alpha"] == 2.0 and isinstance(em["random_state"], int)
    assert not {"n_draws", "burn_in", "n_chains", "learn_nu", "n_jobs"} & set(em)
    mcmc = module_client.post(
        "/train", json=bayes_body("mcmc_svm", n_draws=20, burn_in=5, n_chains=1)
    ).json()["params"]
    assert mcmc["n_draws"] == 20 and mcmc["method"] == "mcmc" and "tol" not in mcmc
