"""The app factory: one FastAPI app from one ``Settings``, one router per resource."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from service import __version__
from service.api.auth import require_api_key
from service.api.docs import install_docs
from service.api.envelope import install_error_handlers
from service.api.known_query import reject_unknown_query
from service.api.metrics import Metrics
from service.api.middleware import RequestContextMiddleware
from service.api.routes import batch, health, jobs, models, plots, predict, train, v2
from service.api.telemetry_gate import ServiceApp, settle_telemetry
from service.api.ui.pages import install_ui
from service.inference.batch_scoring import KIND, batch_runner
from service.inference.batching import MicroBatcher
from service.inference.limits import PredictGate
from service.logs import configure_logging, flush_service_logs
from service.model_types import model_types
from service.repository.opening import open_store
from service.settings import Settings
from service.training.executors import make_executor
from service.training.queue import JobQueue

logger = logging.getLogger("service")

#: Routers of the resources, included in this order behind the API key (after predict's).
RESOURCE_ROUTERS = (train.router, batch.router, plots.router, models.router, jobs.router)
#: Other servers' protocols (service.api.routes.v2), behind the key but for /v2/health/*.
PROTOCOL_ROUTERS = (v2.router, v2.compat_router)

DESCRIPTION = (
    "Train and serve support-vector machines and their classic rivals. Every error uses one "
    "envelope `{error, code, details, request_id}`; when API keys are configured every route "
    "but `/health/*` needs the `X-API-Key` header."
)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Open the repository, start the job queue and freeze the startup objects (``gc``); stop
    this process's jobs on exit."""
    settings: Settings = app.state.settings
    try:
        app.state.store = open_store(settings)
    except Exception:
        logger.exception(
            "the model repository (%s, %s) is not usable",
            settings.registry_url.split("@")[-1],
            settings.artifacts_url,
        )
    store = app.state.store
    if store is not None:
        app.state.metrics.watch_store(store)
        app.state.jobs = JobQueue(
            settings,
            store.db,
            store,
            make_executor(settings),
            app.state.model_types,
            metrics=app.state.metrics,
            runners={KIND: batch_runner(store, settings)},
        ).start()
    if isinstance(app, ServiceApp):
        app.state.telemetry = settle_telemetry(app)
    # what startup built lives as long as the process: out of the collector's way, full
    # collections walk only what requests make (p99 of 64 clients: 117-228 ms -> 27-55 ms);
    # gc.freeze is O(1), with no collection first (startup's little garbage waits for the end)
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()  # collectable again: an app stopped in a longer-lived process (tests)
        if app.state.jobs is not None:
            app.state.jobs.shutdown()
            app.state.jobs.executor.close()
        if store is not None:
            store.db.dispose()
        flush_service_logs()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app: settings, middleware, error envelope, routers, docs, metrics and pages."""
    settings = settings or Settings()
    configure_logging(settings.log_level, settings.access_log_flush_ms)
    app = ServiceApp(
        title="bsvm",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(reject_unknown_query)],  # PredictRoute checks its own
    )
    app.state.settings = settings
    app.state.store = None
    app.state.jobs = None
    app.state.metrics = Metrics()
    app.state.model_types = model_types()
    app.state.predict_gate = PredictGate(settings.predict_concurrency)
    app.state.predict_batcher = (
        MicroBatcher(settings.predict_batch_wait_us / 1e6) if settings.predict_batching else None
    )

    install_error_handlers(app)
    app.add_middleware(RequestContextMiddleware, settings=settings, metrics=app.state.metrics)

    protected = [Depends(require_api_key)]
    # /predict is matched first, on the app's own router (an included one costs a second match);
    # the OpenAPI document is written with sorted keys, so the order does not show there
    app.router.routes.extend(predict.router.routes)
    app.include_router(health.router)
    app.include_router(v2.health_router)
    app.include_router(health.ops_router, dependencies=protected)
    app.include_router(app.state.metrics.router, dependencies=protected)
    for router in RESOURCE_ROUTERS + PROTOCOL_ROUTERS:
        app.include_router(router, dependencies=protected)
    install_docs(app, public=settings.public_docs)
    install_ui(app)
    return app
