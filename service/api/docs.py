"""Swagger UI at ``/docs`` from assets installed with the service (no CDN, works offline)."""

from __future__ import annotations

from pathlib import Path

import swagger_ui
from fastapi import Depends, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from service.api.auth import require_api_key
from service.api.openapi import build_openapi, install_openapi

#: swagger-ui-dist files shipped inside the ``swagger-ui-py`` wheel (Swagger UI 5, OpenAPI 3.1).
ASSETS_DIR = Path(swagger_ui.__file__).resolve().parent / "static"
ASSETS_URL = "/docs/static"


def install_docs(app: FastAPI, *, public: bool) -> None:
    """Serve ``/openapi.json`` and ``/docs``; behind the API key unless ``public``."""
    install_openapi(app)
    dependencies = [] if public else [Depends(require_api_key)]
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="swagger-ui-assets")

    @app.get("/openapi.json", include_in_schema=False, dependencies=dependencies)
    def openapi_document() -> JSONResponse:
        """The OpenAPI 3.1 document of this app."""
        return JSONResponse(build_openapi(app))

    @app.get("/docs", include_in_schema=False, dependencies=dependencies)
    def swagger_ui_page() -> HTMLResponse:
        """Swagger UI over ``/openapi.json``, with its scripts served locally."""
        return get_swagger_ui_html(
            openapi_url="/openapi.json",
            title=f"{app.title} — API docs",
            swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_URL}/favicon-32x32.png",
        )
