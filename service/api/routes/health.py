"""Operations routes: liveness and readiness (always open), versions (behind the key)."""

from __future__ import annotations

import platform

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from service import __version__
from service.api.openapi import error_responses
from service.training.tasks import LIBRARIES as MODEL_LIBRARIES
from service.training.tasks import library_version

router = APIRouter(prefix="/health", tags=["operations"])
BACKENDS = ("database", "store")
ops_router = APIRouter(tags=["operations"])

#: Distributions whose versions ``/version`` reports.
LIBRARIES = (*MODEL_LIBRARIES, "fastapi", "pydantic", "uvicorn")


class Live(BaseModel):
    """The process answers."""

    status: str = Field("ok", description="Always 'ok'.")


class Readiness(BaseModel):
    """Whether the service can take traffic, and why not."""

    status: str = Field(description="'ready' or 'not_ready'.")
    checks: dict[str, bool] = Field(
        description="Each check by name: database (the registry database answers), store (the "
        "artifact store answers), registry (the model types are read). Each back end is waited "
        "for at most 2 s."
    )
    model_types: list[str] = Field(description="Model types registered.")


class VersionInfo(BaseModel):
    """Versions of the service, Python and the libraries a model depends on."""

    service: str
    python: str
    libraries: dict[str, str | None]


@router.get("/live", response_model=Live)
def live() -> Live:
    """Liveness: 200 whenever the process serves requests."""
    return Live()


@router.get(
    "/ready",
    response_model=Readiness,
    responses={
        503: {
            "model": Readiness,
            "description": "The database or the artifact store is down or did not answer within "
            "2 s, or the registry is not read.",
        }
    },
)
def ready(request: Request) -> JSONResponse:
    """Readiness: 200 when the database and the artifact store answer (each within 2 s) and the
    registry is read, else 503."""
    state = request.app.state
    registry = state.model_types
    store = state.store
    backends = store.check_backends() if store is not None else dict.fromkeys(BACKENDS, False)
    checks = {**backends, "registry": registry is not None}
    ok = all(checks.values())
    body = Readiness(
        status="ready" if ok else "not_ready",
        checks=checks,
        model_types=sorted(registry or ()),
    )
    headers = {} if ok else {"Retry-After": "5"}
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503, headers=headers)


@ops_router.get("/version", response_model=VersionInfo, responses=error_responses(401))
def version() -> VersionInfo:
    """Versions of the service, Python and its libraries."""
    return VersionInfo(
        service=__version__,
        python=platform.python_version(),
        libraries={name: library_version(name) for name in LIBRARIES},
    )
