"""The pages for people in a real browser, on a server with an API key.

Headless Chromium (``tests/service/app/browser.py``) signs in through the key form, then opens
``/``, the names, a name's versions, three models (a linear SVM with cross-validation, an MCMC
Bayesian SVM on 30 features, an EM one) and the jobs. Each page must render with no script, no
console error, no request outside the server, every ``<img>`` loaded (the plots) and no
horizontal scrolling at 1280 px; the jobs page must reload itself while a job runs. A screenshot
of every page is kept in ``var/test-artifacts/ui/`` (or ``$TEST_ARTIFACTS_DIR/ui``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sklearn.datasets import load_breast_cancer, load_iris

from service.api.examples import IRIS_X, IRIS_Y
from tests.service.app.browser import chromium_page, outside_requests
from tests.service.live_server import ROOT, live_server

pytestmark = pytest.mark.slow

KEY = "browser-test-key"
SCRIPT = "<script>alert(1)</script>"
WIDTH = 1280
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS_DIR") or ROOT / "var" / "test-artifacts") / "ui"
ALL_IMAGES_LOADED = "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"


@pytest.fixture()
def page() -> Iterator[Any]:
    with chromium_page(width=WIDTH, height=900) as page:
        page.problems = []
        page.on("console", lambda m: m.type == "error" and page.problems.append(m.text))
        page.on("pageerror", lambda e: page.problems.append(str(e)))
        yield page


def train(api: httpx.Client, **body: Any) -> dict[str, Any]:
    response = api.post("/train", json=body, timeout=120)
    assert response.status_code in (201, 202), response.text
    return response.json()


def wait_done(api: httpx.Client, job_id: str) -> None:
    deadline = time.monotonic() + 120
    while api.get(f"/jobs/{job_id}").json()["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, f"job {job_id} did not finish"
        time.sleep(0.2)


def models_to_show(api: httpx.Client) -> dict[str, str]:
    """Train the models the pages show; their page URLs by screenshot name."""
    cancer = load_breast_cancer()
    X, names = cancer.data.round(4).tolist(), [str(n) for n in cancer.feature_names]
    y = [str(cancer.target_names[t]) for t in cancer.target]
    linear = train(
        api,
        model_type="linear_svm",
        X=IRIS_X,
        y=IRIS_Y,
        name="iris-linear",
        evaluation={"cv": 3},
        tags={"owner": "browser-test", "note": SCRIPT},
        description=f"A linear SVM on twelve iris rows. {SCRIPT}",
    )
    api.put("/models/by-name/iris-linear/aliases/production", json={"version": 1})
    job = train(
        api,
        model_type="mcmc_svm",
        X=X,
        y=y,
        feature_names=names,
        name="cancer-mcmc",
        params={"alpha": 2.0, "nu": 1.0, "n_draws": 300, "burn_in": 100, "n_chains": 2},
        evaluation={"cv": 3},
        background=True,
    )
    wait_done(api, job["job_id"])
    train(api, model_type="em_svm", X=IRIS_X, y=IRIS_Y, name="iris-em", params={"alpha": 2.0})
    iris = load_iris()
    train(
        api,
        model_type="em_svm",
        X=iris.data.tolist(),
        y=[str(iris.target_names[t]) for t in iris.target],
        feature_names=[str(n) for n in iris.feature_names],
        name="iris-pairs",
        params={"alpha": 2.0, "multiclass": "ovo"},
    )
    return {
        "model-linear": f"/ui/models/{linear['model_id']}",
        "model-mcmc": "/ui/models/cancer-mcmc",
        "model-em": "/ui/models/iris-em",
        "model-em-ovo": "/ui/models/iris-pairs",
    }


def check_page(page: Any, url: str, shot: str) -> None:
    """Open ``url``, scroll through it (the plots load lazily), check it, keep a screenshot."""
    response = page.goto(url)
    assert response is not None and response.status == 200, f"{url}: {response and response.status}"
    height = page.evaluate("document.documentElement.scrollHeight")
    for y in range(0, height + 900, 600):
        page.evaluate(f"window.scrollTo(0, {y})")
        page.wait_for_timeout(50)
    deadline = time.monotonic() + 60  # wait_for_function evaluates a string: the CSP forbids it
    while not page.evaluate(ALL_IMAGES_LOADED):
        assert time.monotonic() < deadline, f"{url}: an <img> did not load"
        page.wait_for_timeout(100)
    assert page.evaluate("document.scripts.length") == 0, url
    scroll_width = page.evaluate("document.documentElement.scrollWidth")
    assert scroll_width <= WIDTH, f"{url} scrolls sideways: {scroll_width} px wide"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)


def test_every_page_renders_offline_with_its_plots(page, tmp_path):
    with (
        live_server(tmp_path / "data", tmp_path, api_keys=KEY) as url,
        httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=30) as api,
    ):
        pages = models_to_show(api)
        page.goto(f"{url}/ui/names/iris-linear")  # no session: the key form
        assert page.url.endswith("/ui/key?next=/ui/names/iris-linear")
        page.fill("#key", "not-the-key")
        page.click("button[type=submit]")
        page.locator(".error").wait_for()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "key-form.png"), full_page=True)
        assert page.problems == ["Failed to load resource: the server responded with a status of 401 (Unauthorized)"]  # fmt: skip
        page.problems.clear()
        page.fill("#key", KEY)
        page.click("button[type=submit]")
        page.wait_for_url(f"{url}/ui/names/iris-linear")
        check_page(page, f"{url}/ui/names/iris-linear", "name")
        assert page.locator("text=production").count() >= 1
        check_page(page, f"{url}/", "home")
        check_page(page, f"{url}/ui", "names")
        for shot, path in pages.items():
            check_page(page, url + path, shot)
        plots = page.evaluate("Array.from(document.images).map(i => i.src)")
        assert any("compare.png" in p for p in plots) and any("path.png" in p for p in plots)
        page.goto(url + pages["model-linear"])
        assert page.locator(f"text={SCRIPT}").count() == 2  # the tag and the description
        assert page.evaluate("document.images.length") == 2  # ROC and boundary

        job = train(
            api,
            model_type="mcmc_svm",
            X=IRIS_X,
            y=IRIS_Y,
            name="iris-long",
            params={"n_draws": 100_000, "burn_in": 0, "n_chains": 16},
            background=True,
        )
        try:
            before = sum(u.endswith("/ui/jobs") for u in page.requested)
            check_page(page, f"{url}/ui/jobs", "jobs")
            deadline = time.monotonic() + 10  # the page reloads itself every 2 s
            while (reloads := sum(u.endswith("/ui/jobs") for u in page.requested) - before) < 2:
                assert time.monotonic() < deadline, f"the jobs page loaded {reloads} times in 10 s"
                page.wait_for_timeout(100)
        finally:
            api.delete(f"/jobs/{job['job_id']}")
    assert page.problems == [], page.problems
    outside = outside_requests(page, url)
    assert outside == [], f"the pages made outside requests: {outside}"
