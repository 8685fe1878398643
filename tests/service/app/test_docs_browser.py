"""/docs in a real browser: Swagger UI renders from the server's own assets and "Try it out" works.

Headless Chromium (Debian's ``chromium``, which ``scripts/test.sh`` installs) driven by Playwright;
``playwright install`` is never needed. Every request the page makes is recorded and must go to
the live server. On failure a screenshot is written next to the test's tmp dir (path in the error).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.service.live_server import live_server

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TIMEOUT_MS = 60_000
TRAIN_OP = "#operations-train-train_train_post"
PREDICT_OP = "#operations-predict-predict_predict_post"


@pytest.fixture()
def page(tmp_path: Path) -> Iterator:
    """A fresh headless Chromium page that records every URL it requests."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 2000})
            page.set_default_timeout(TIMEOUT_MS)
            page.requested = []
            page.on("request", lambda request: page.requested.append(request.url))
            yield page
        finally:
            browser.close()


def try_it_out(page, operation: str, status: str) -> str:
    """Open ``operation``, press "Try it out" and "Execute" with its example; the body shown."""
    block = page.locator(operation)
    block.locator(".opblock-summary").first.click()
    block.locator("button.try-out__btn").click()
    body = block.locator(".body-param textarea")
    body.wait_for(state="visible")
    assert '"model' in body.input_value(), "the example body was not filled in"
    block.locator("button.execute").click()
    row = block.locator(".live-responses-table .response")
    row.locator(".response-col_status").filter(has_text=status).wait_for()
    return row.locator(".response-col_description pre").first.inner_text()


def test_swagger_ui_runs_the_examples_offline(page, tmp_path):
    with live_server(tmp_path / "data", tmp_path) as url:
        try:
            page.goto(f"{url}/docs")
            page.locator(".swagger-ui .info .title").filter(has_text="bsvm").wait_for()
            page.locator(TRAIN_OP).wait_for()
            trained = try_it_out(page, TRAIN_OP, "201")
            assert '"model_id"' in trained and '"iris-demo"' in trained, trained
            predicted = try_it_out(page, PREDICT_OP, "200")
            assert '"predictions"' in predicted and '"setosa"' in predicted, predicted
        except Exception:
            shot = tmp_path / "docs-failure.png"
            page.screenshot(path=str(shot), full_page=True)
            raise AssertionError(f"see the screenshot {shot}") from None
        origin = urlparse(url)
        outside = [
            u
            for u in page.requested
            if urlparse(u).scheme not in ("data", "blob")
            and (urlparse(u).hostname, urlparse(u).port) != (origin.hostname, origin.port)
        ]
        assert outside == [], f"the docs page made outside requests: {outside}"
        local = [urlparse(u).path for u in page.requested]
        assert "/docs/static/swagger-ui-bundle.js" in local and "/openapi.json" in local
        assert "/train" in local and "/predict" in local
