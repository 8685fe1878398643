"""Unknown query parameters are a 422 naming them, on every route.

A route's known parameters are those its OpenAPI operation declares: the ones FastAPI reads for
its endpoint and dependencies, and those of ``openapi_extra`` (the CSV bodies' query, ``?model=``
of other servers' bodies). Anything else was meant for something (``?cv=5``) and would otherwise
be ignored silently; the 422 names it, the closest known one and every known one
(``service.errors.unknown_name``).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.dependencies.models import Dependant
from starlette.datastructures import QueryParams
from starlette.types import Scope

from service.errors import InvalidInput, detail, unknown_name

_KNOWN = "_bsvm_known_query"


def _dependant_names(dependant: Dependant) -> set[str]:
    names = {p.alias for p in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _dependant_names(sub)
    return names


def known_query(route: Any) -> frozenset[str]:
    """The query parameters ``route`` declares (computed once per route)."""
    known = getattr(route, _KNOWN, None)
    if known is None:
        names = _dependant_names(route.dependant) if hasattr(route, "dependant") else set()
        extra = getattr(route, "openapi_extra", None) or {}
        names |= {p["name"] for p in extra.get("parameters", []) if p.get("in") == "query"}
        known = frozenset(names)
        setattr(route, _KNOWN, known)
    return known


def check_query(scope: Scope, route: Any) -> None:
    """422 naming every query parameter ``route`` does not declare (nothing to do without one)."""
    raw = scope.get("query_string")
    if not raw or route is None or not getattr(route, "include_in_schema", True):
        return  # pages for people (/ui, /docs) take what their links carry
    known = known_query(route)
    unknown = [name for name in dict.fromkeys(QueryParams(raw).keys()) if name not in known]
    if unknown:
        raise InvalidInput(
            "unknown query parameter" + ("s" if len(unknown) > 1 else ""),
            [detail(name[:64], unknown_name(name, known)) for name in unknown[:10]],
        )


def reject_unknown_query(request: Request) -> None:
    """The app-wide dependency: ``check_query`` on the matched route."""
    check_query(request.scope, request.scope.get("route"))
