"""``/models``: list, read and delete stored models; aliases; the posterior of Bayesian models."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request, Response

from service.api.content_types import BodyRoute
from service.api.deps import StoreDep
from service.api.openapi import error_responses
from service.api.params import Level, ModelRef, Scale
from service.inference.posterior import coefficient_summaries, coefficient_trace
from service.plots.trace import trace_png
from service.repository.store import ModelStore
from service.schemas.models import (
    AliasList,
    AliasUpdate,
    ModelList,
    ModelRecord,
    ModelSummary,
    ModelSummaryList,
    Posterior,
)
from service.schemas.names import ALIAS_PATTERN, NAME_PATTERN
from service.schemas.predict import DEFAULT_LEVEL

router = APIRouter(prefix="/models", tags=["models"], route_class=BodyRoute)

Name = Annotated[str, Path(pattern=NAME_PATTERN, max_length=64, description="Model name.")]
Alias = Annotated[str, Path(pattern=ALIAS_PATTERN, max_length=32, description="Alias.")]
TAG_FILTER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}(=.{0,256})?$"
View = Annotated[
    Literal["compact", "full"],
    Query(
        description="compact: id, name, version, aliases, type, created, accuracy; full: records."
    ),
]
PNG_RESPONSE: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "PNG: trace of every chain (left), pooled density with mean and interval.",
        "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def listing(items: list[dict[str, Any]], total: int, limit: int, offset: int, view: str) -> Any:
    """One page of a list in the view asked for."""
    if view == "full":
        return ModelList(items=items, total=total, limit=limit, offset=offset)
    summaries = [ModelSummary.of(item) for item in items]
    return ModelSummaryList(items=summaries, total=total, limit=limit, offset=offset)


@router.get("", response_model=ModelSummaryList | ModelList, responses=error_responses(422, 503))
def list_models(
    store: StoreDep,
    view: View = "compact",
    name: Annotated[str | None, Query(pattern=NAME_PATTERN, max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    page: Annotated[
        int | None, Query(ge=1, le=10**6, description="1-based; with page_size.")
    ] = None,
    page_size: Annotated[int | None, Query(ge=1, le=1000)] = None,
    model_type: Annotated[
        str | None, Query(max_length=32, pattern=r"^[a-z_]+$", description="Only this type.")
    ] = None,
    alias: Annotated[
        str | None,
        Query(pattern=ALIAS_PATTERN, max_length=32, description="Only versions this alias names."),
    ] = None,
    tag: Annotated[
        str | None,
        Query(
            pattern=TAG_FILTER_PATTERN,
            max_length=321,
            description="`key` (any value) or `key=value`.",
        ),
    ] = None,
) -> Any:
    """Models, newest first (compact; `?view=full` for the records); page by limit/offset or
    page/page_size; filter by name, model type, alias and tag."""
    if page is not None or page_size is not None:
        limit = page_size or limit
        offset = ((page or 1) - 1) * limit
    items, total = store.list_records(
        name=name, limit=limit, offset=offset, model_type=model_type, alias=alias, tag=tag
    )
    return listing(items, total, limit, offset, view)


def resolved(ref: str, store: ModelStore, request: Request) -> str:
    """The model id ``ref`` names (404/422), noted for the request log."""
    model_id = store.resolve(ref, field="model")
    request.state.model_id = model_id
    return model_id


@router.get(
    "/{name}/versions",
    response_model=ModelSummaryList | ModelList,
    responses=error_responses(404, 422, 503),
)
def list_versions(
    name: Name,
    store: StoreDep,
    view: View = "compact",
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
) -> Any:
    """Every version of one name, newest first (compact; `?view=full` for the records; 404 for
    an unknown name)."""
    items, total = store.list_records(name=name, limit=limit, offset=offset)
    if total == 0:
        store.registry.aliases_of(name)  # 404 unless the name exists (all versions deleted)
    return listing(items, total, limit, offset, view)


@router.get("/{ref}", response_model=ModelRecord, responses=error_responses(404, 422, 503))
def get_model(ref: ModelRef, store: StoreDep, request: Request) -> Any:
    """The record of one model (by id, name, name:version or name@alias), with its signature."""
    return store.get_record(resolved(ref, store, request))


@router.delete("/{ref}", status_code=204, responses=error_responses(404, 422, 503))
def delete_model(ref: ModelRef, store: StoreDep, request: Request) -> Response:
    """Delete one model (by id or reference): its artifact, cache entry and aliases to it."""
    store.delete(resolved(ref, store, request))
    return Response(status_code=204)


@router.get(
    "/by-name/{name}/aliases", response_model=AliasList, responses=error_responses(404, 422, 503)
)
def list_aliases(name: Name, store: StoreDep) -> Any:
    """Every alias of a name and the version it points at."""
    return {"name": name, "aliases": store.registry.aliases_of(name)}


@router.delete(
    "/by-name/{name}/aliases/{alias}", status_code=204, responses=error_responses(404, 422, 503)
)
def delete_alias(name: Name, alias: Alias, store: StoreDep) -> Response:
    """Remove an alias; the version it pointed at stays."""
    store.registry.delete_alias(name, alias)
    return Response(status_code=204)


@router.put(
    "/by-name/{name}/aliases/{alias}",
    response_model=ModelRecord,
    responses=error_responses(404, 422, 503),
)
def set_alias(name: Name, alias: Alias, body: AliasUpdate, store: StoreDep) -> Any:
    """Point ``name@alias`` at a version; answer that version's record."""
    return store.set_alias(name, alias, body.version)


@router.get(
    "/{ref}/posterior",
    response_model=Posterior,
    responses=error_responses(404, 409, 422, 503),
)
def get_posterior(
    ref: ModelRef,
    store: StoreDep,
    request: Request,
    level: Level = DEFAULT_LEVEL,
    scale: Scale = "original",
) -> Any:
    """Coefficient intervals and diagnostics of a Bayesian model (409 for other models)."""
    return coefficient_summaries(store, resolved(ref, store, request), level, scale)


@router.get(
    "/{ref}/posterior/plot",
    response_class=Response,
    responses={**PNG_RESPONSE, **error_responses(404, 409, 422, 503)},
)
def get_posterior_plot(
    ref: ModelRef,
    store: StoreDep,
    request: Request,
    coef: Annotated[
        str,
        Query(
            min_length=1,
            max_length=256,
            description="Coefficient: a feature name as in GET /models/{id}/posterior, "
            "'intercept', or a 0-based feature index (a name wins over an index).",
        ),
    ],
    level: Level = DEFAULT_LEVEL,
    scale: Scale = "original",
    class_label: Annotated[
        str | None,
        Query(
            alias="class",
            max_length=256,
            description="Class whose one-vs-rest coefficients to plot (one-vs-one: the pair's "
            "positive class, as `class` in GET /models/{id}/posterior); required with more "
            "than two classes.",
        ),
    ] = None,
    versus: Annotated[
        str | None,
        Query(
            max_length=256,
            description="One-vs-one with more than two classes: the pair's other class "
            "(`versus` in GET /models/{id}/posterior); required there, refused otherwise.",
        ),
    ] = None,
) -> Response:
    """Trace and density PNG of one coefficient's MCMC draws (409 for models without draws)."""
    model_id = resolved(ref, store, request)
    trace = coefficient_trace(store, model_id, coef, level, scale, class_label, versus)
    return Response(content=trace_png(trace), media_type="image/png")
