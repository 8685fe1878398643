"""``POST /predict``: labels, decision values, probabilities or intervals from a stored model."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request

from service.api.csv_bodies import CsvRoute, csv_openapi
from service.api.deps import GateDep, SettingsDep, StoreDep
from service.api.examples import DEFAULT_MODEL, PREDICT_CSV, PREDICT_EXAMPLES
from service.api.openapi import error_responses
from service.api.schemas.predict import PredictRequest, PredictResponse
from service.inference import predict as prediction

router = APIRouter(tags=["predict"], route_class=CsvRoute)

CSV_BODY = "CSV with a header row of feature names; columns are put in the model's order."
CSV_QUERY = {
    "model": "model reference (required)",
    "outputs": "repeatable: label, decision, probability, interval",
    "level": "credible level of interval",
}


@router.post(
    "/predict",
    response_model=PredictResponse,
    responses=error_responses(400, 404, 409, 422, 503),
    openapi_extra=csv_openapi(
        CSV_BODY,
        CSV_QUERY,
        arrays=("outputs",),
        example=PREDICT_CSV,
        query_examples={"model": DEFAULT_MODEL},
    ),
)
def predict(
    body: Annotated[PredictRequest, Body(openapi_examples=PREDICT_EXAMPLES)],
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    gate: GateDep,
) -> Any:
    """Score rows (JSON or CSV) with a model given by id, name, name@alias or name:version."""
    with gate.slot():
        out = prediction.predict(store, settings, body)
    request.state.model_id = out["model_id"]
    return out
