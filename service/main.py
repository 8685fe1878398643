"""The app factory: one FastAPI app from one ``Settings``, one router per resource."""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Any

from fastapi import Depends, FastAPI

from service import __version__
from service.auth import require_api_key
from service.docs_ui import install_docs
from service.error_handlers import install_error_handlers
from service.logs import configure_logging
from service.metrics import Metrics
from service.middleware import RequestContextMiddleware
from service.settings import Settings

logger = logging.getLogger("service")

#: Routers written beside this module, included in this order when their module exists.
RESOURCE_ROUTERS = ("train", "predict", "models", "jobs")

DESCRIPTION = (
    "Train and serve support-vector machines and their classic rivals. Every error uses one "
    "envelope `{error, code, details, request_id}`; when API keys are configured every route "
    "but `/health/*` needs the `X-API-Key` header."
)


def _optional_module(name: str) -> ModuleType | None:
    """Import ``name`` if it exists; a module that is not written yet is simply skipped."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            logger.warning("module %s not available; its routes are not served", name)
            return None
        raise


def _build_registry() -> Any:
    """The model-type registry, or ``None`` while ``service.registry`` does not exist."""
    module = _optional_module("service.registry")
    return None if module is None else module.build_registry()


def _make_jobs(module: ModuleType, settings: Settings, store: Any, registry: Any, metrics: Metrics):
    """A ``JobManager``, handed the metrics when its constructor takes them."""
    cls = module.JobManager
    if "metrics" in inspect.signature(cls).parameters:
        return cls(settings, store, registry, metrics=metrics)
    jobs = cls(settings, store, registry)
    jobs.metrics = metrics
    return jobs


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the store and the job manager; shut the jobs down on exit."""
    settings: Settings = app.state.settings
    store_mod = _optional_module("service.store")
    jobs_mod = _optional_module("service.jobs")
    if store_mod is not None:
        try:
            app.state.store = store_mod.ModelStore(settings)
        except OSError:
            logger.exception("model store at %s is not usable", settings.model_dir)
    store = app.state.store
    if store is not None:
        app.state.metrics.watch_store(store)
    if jobs_mod is not None and store is not None:
        app.state.jobs = _make_jobs(
            jobs_mod, settings, store, app.state.registry, app.state.metrics
        )
    try:
        yield
    finally:
        jobs = app.state.jobs
        if jobs is not None:
            jobs.shutdown()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app: settings, middleware, error envelope, routers, docs and metrics."""
    settings = settings or Settings()
    configure_logging(settings.log_level)
    app = FastAPI(
        title="bsvm",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.settings = settings
    app.state.store = None
    app.state.jobs = None
    app.state.metrics = Metrics()
    app.state.registry = _build_registry()

    install_error_handlers(app)
    app.add_middleware(RequestContextMiddleware, settings=settings, metrics=app.state.metrics)

    protected = [Depends(require_api_key)]
    from service.routes import health

    app.include_router(health.router)
    app.include_router(health.ops_router, dependencies=protected)
    app.include_router(app.state.metrics.router, dependencies=protected)
    for name in RESOURCE_ROUTERS:
        module = _optional_module(f"service.routes.{name}")
        if module is not None:
            app.include_router(module.router, dependencies=protected)
    install_docs(app, public=settings.public_docs)
    return app
