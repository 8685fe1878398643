"""``POST /predict``: labels, decision values, probabilities or intervals from a stored model."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends

from service.api.auth import require_api_key
from service.api.binary_openapi import with_binary_data
from service.api.csv_route import csv_openapi
from service.api.examples import DEFAULT_MODEL, PREDICT_CSV, PREDICT_EXAMPLES
from service.api.openapi import CSV_RESPONSE, error_responses, with_model_query
from service.api.predict_route import PredictRoute
from service.schemas.predict import PredictRequest, PredictResponse

#: Its own routes carry the key check: app.py puts them on the app's router, not included.
router = APIRouter(
    tags=["predict"], route_class=PredictRoute, dependencies=[Depends(require_api_key)]
)

CSV_BODY = "CSV with a header row of feature names; columns are put in the model's order."
CSV_QUERY = {
    "model": "model reference (required)",
    "outputs": "repeatable: predictions, decision_function, probabilities, intervals",
    "level": "credible level of interval",
}


@router.post(
    "/predict",
    response_model=PredictResponse,
    responses={**error_responses(400, 404, 409, 422, 503), **CSV_RESPONSE},
    openapi_extra=with_binary_data(
        with_model_query(
            csv_openapi(
                CSV_BODY,
                CSV_QUERY,
                arrays=("outputs",),
                example=PREDICT_CSV,
                query_examples={"model": DEFAULT_MODEL},
            )
        )
    ),
)
def predict(body: Annotated[PredictRequest, Body(openapi_examples=PREDICT_EXAMPLES)]) -> Any:
    """Score rows (JSON or CSV) with a model given by id, name, name@alias or name:version.

    `Accept: text/csv` answers CSV. Other servers' bodies are taken too, with the model in
    `?model=`: MLflow's `dataframe_split`, `dataframe_records`, `instances`, `inputs` and
    KServe V1's `instances` (answered `{"predictions": [...]}`), and Open Inference Protocol
    `inputs` tensors (answered as a V2 inference response), also as binary tensor data
    (`Content-Type: application/octet-stream`, `Inference-Header-Content-Length`: see
    `/v2/models/{name}/infer`).
    """
    # the signature declares the JSON body; PredictRoute's handler reads and answers every body
    raise NotImplementedError  # pragma: no cover
