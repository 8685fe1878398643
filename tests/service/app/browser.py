"""Headless Chromium for the browser tests (Debian's ``chromium``, which ``scripts/test.sh``
installs), driven by Playwright; ``playwright install`` is never needed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

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


@contextmanager
def chromium_page(width: int = 1280, height: int = 2000) -> Iterator[Any]:
    """A fresh page that records every URL it requests (``page.requested``)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(TIMEOUT_MS)
            page.requested = []
            page.on("request", lambda request: page.requested.append(request.url))
            yield page
        finally:
            browser.close()


def outside_requests(page: Any, base_url: str) -> list[str]:
    """The URLs ``page`` requested from anywhere but the server at ``base_url``."""
    origin = urlparse(base_url)
    return [
        u
        for u in page.requested
        if urlparse(u).scheme not in ("data", "blob")
        and (urlparse(u).hostname, urlparse(u).port) != (origin.hostname, origin.port)
    ]
