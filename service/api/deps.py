"""Dependencies of the routes as ``Annotated`` aliases, each reading one object off ``app.state``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Request

from service.errors import Unavailable
from service.inference.limits import PredictGate
from service.model_types import ModelTypes
from service.repository.store import ModelStore
from service.settings import Settings
from service.training.queue import JobQueue

NOT_READY = {"Retry-After": "5"}


def get_settings(request: Request) -> Settings:
    """The app's settings."""
    return request.app.state.settings


def store_of(state: Any) -> ModelStore:
    """The model store of an app's ``state`` (503 until it is usable)."""
    store = getattr(state, "store", None)
    if store is None:
        raise Unavailable("the model store is not available", headers=NOT_READY)
    return store


def get_store(request: Request) -> ModelStore:
    """The model store (503 until it is usable)."""
    return store_of(request.app.state)


def get_jobs(request: Request) -> JobQueue:
    """The job manager (503 until it exists)."""
    jobs = getattr(request.app.state, "jobs", None)
    if jobs is None:
        raise Unavailable(
            "training is not available: the model store is not usable yet", headers=NOT_READY
        )
    return jobs


def get_model_types(request: Request) -> ModelTypes:
    """The model types (503 when they could not be read)."""
    types = getattr(request.app.state, "model_types", None)
    if types is None:
        raise Unavailable("the model registry is not available", headers=NOT_READY)
    return types


def get_predict_gate(request: Request) -> PredictGate:
    """The bound on concurrent predicts of this process."""
    return request.app.state.predict_gate


SettingsDep = Annotated[Settings, Depends(get_settings)]
StoreDep = Annotated[ModelStore, Depends(get_store)]
JobsDep = Annotated[JobQueue, Depends(get_jobs)]
ModelTypesDep = Annotated[ModelTypes, Depends(get_model_types)]
GateDep = Annotated[PredictGate, Depends(get_predict_gate)]
