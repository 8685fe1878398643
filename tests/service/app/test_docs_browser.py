"""/docs in a real browser: Swagger UI renders from the server's own assets and "Try it out" works.

Headless Chromium driven by Playwright (``tests/service/app/browser.py``). Every request the page
makes is recorded and must go to the live server. On failure a screenshot is written next to the test's tmp dir (path in the error).
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

from tests.service.app.browser import chromium_page, outside_requests
from tests.service.live_server import live_server

pytestmark = pytest.mark.slow

TRAIN_OP = "#operations-train-train_train_post"
PREDICT_OP = "#operations-predict-predict_predict_post"


@pytest.fixture()
def page() -> Iterator:
    """A fresh headless Chromium page that records every URL it requests."""
    with chromium_page() as page:
        yield page


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
        outside = outside_requests(page, url)
        assert outside == [], f"the docs page made outside requests: {outside}"
        local = [urlparse(u).path for u in page.requested]
        assert "/docs/static/swagger-ui-bundle.js" in local and "/openapi.json" in local
        assert "/train" in local and "/predict" in local
