"""The pages for people: ``GET /`` (links, or JSON for ``Accept: application/json``) and ``/ui``,
a model browser rendered on the server from Jinja2 templates (no script, no CDN: works offline).

``/ui`` lists names (then a name's versions, then one model: record, metrics, warnings, plots,
posterior) and the jobs. With ``BSVM_API_KEYS`` set a page wants ``X-API-Key`` or the session
cookie of the key form (``service.api.ui.session``); a browser without either is sent to the form.
Every page forbids scripts, frames and outside requests (``Content-Security-Policy``), and the
templates escape every value (Jinja2's autoescape).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, quote, urlparse

import jinja2
from fastapi import APIRouter, Depends, FastAPI, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from service import __version__
from service.api.auth import API_KEY_HEADER, key_is_valid
from service.api.deps import JobsDep, SettingsDep, StoreDep
from service.api.params import ModelRef
from service.api.routes import models as model_routes
from service.api.routes import plots as plot_routes
from service.api.ui import views
from service.api.ui.session import COOKIE, COOKIE_PATH, SESSION_S, new_token, token_is_valid
from service.errors import ApiError
from service.inference.posterior import coefficient_summaries
from service.schemas.names import NAME_PATTERN
from service.schemas.predict import DEFAULT_LEVEL

HERE = Path(__file__).resolve().parent
STATIC_URL = "/ui/static"
PAGE_SIZE = 100
JOBS_REFRESH_S = 2
#: Every page: no script, no frame, nothing from elsewhere; forms post only here.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_NEXT = re.compile(r"^/ui(/[A-Za-z0-9._~%@:/-]*)?(\?[^\s#]*)?$")

templates = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.filters["num"] = views.number
templates.filters["metric"] = views.metric
templates.filters["when"] = views.when


class SignInRequired(Exception):
    """A page asked for without a key or session while keys are configured."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


def signed_in(request: Request) -> bool:
    """True when keys are configured and the request holds a valid session cookie."""
    return token_is_valid(request.app.state.settings, request.cookies.get(COOKIE))


def render(request: Request, template: str, status_code: int = 200, **context: Any) -> Response:
    """A page from ``template`` with the security headers."""
    settings = request.app.state.settings
    values = {
        "version": __version__,
        "keys_required": bool(settings.api_keys),
        "signed_in": signed_in(request),
        "refresh": None,
        **context,
    }
    html = templates.get_template(template).render(values)
    return HTMLResponse(html, status_code=status_code, headers=PAGE_HEADERS)


def require_page_access(request: Request) -> None:
    """Dependency of every ``/ui`` page: a valid ``X-API-Key`` or session cookie (when keys are
    configured); otherwise the browser is sent to the key form."""
    settings = request.app.state.settings
    key = request.headers.get(API_KEY_HEADER)
    if not settings.api_keys or (key and key_is_valid(settings, key)) or signed_in(request):
        return
    query = request.url.query
    raise SignInRequired(request.url.path + (f"?{query}" if query else ""))


class PageRoute(APIRoute):
    """A page route: an ``ApiError`` (unknown model, database down) is answered as a page with
    its status, not as the JSON envelope."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except ApiError as exc:
                return render(request, "error.html", exc.status_code, title="Error", error=exc)

        return page_handler


home_router = APIRouter(include_in_schema=False)
open_router = APIRouter(prefix="/ui", include_in_schema=False, route_class=PageRoute)
router = APIRouter(
    prefix="/ui",
    include_in_schema=False,
    route_class=PageRoute,
    dependencies=[Depends(require_page_access)],
)

HOME_LINKS = {
    "ui": "/ui",
    "docs": "/docs",
    "openapi": "/openapi.json",
    "live": "/health/live",
    "ready": "/health/ready",
}


@home_router.get("/")
def home(request: Request) -> Response:
    """A small page of links (JSON for ``Accept: application/json``)."""
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/html" not in accept:
        return JSONResponse({"name": "bsvm", "version": __version__, "links": HOME_LINKS})
    return render(request, "home.html", title="bsvm", links=HOME_LINKS)


# -- the key form ------------------------------------------------------------------------------
def safe_next(value: str | None) -> str:
    """Where to go after signing in: a ``/ui`` path of this server, never elsewhere."""
    return value if value and _NEXT.match(value) and "//" not in value else "/ui"


def same_origin(request: Request) -> bool:
    """False when the browser says the form was posted from another site's page."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlparse(origin).netloc == request.headers.get("host")


@open_router.get("/key")
def key_form(
    request: Request,
    next_url: Annotated[str | None, Query(alias="next", max_length=2000)] = None,
) -> Response:
    """The form that turns a key into a session cookie."""
    return render(request, "key.html", title="Sign in", next_url=safe_next(next_url), failed=False)


@open_router.post("/key")
async def sign_in(request: Request) -> Response:
    """Check the key; a session cookie (HttpOnly, SameSite=Strict, Path=/ui) when it is valid."""
    settings = request.app.state.settings
    if not same_origin(request):
        return render(request, "key.html", 403, title="Sign in", next_url="/ui", failed=True)
    form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=4)
    key = (form.get("key") or [""])[0]
    next_url = safe_next((form.get("next") or [None])[0])
    if not settings.api_keys:
        return RedirectResponse(next_url, status_code=303, headers=PAGE_HEADERS)
    if not key or not key_is_valid(settings, key):
        return render(request, "key.html", 401, title="Sign in", next_url=next_url, failed=True)
    response = RedirectResponse(next_url, status_code=303, headers=PAGE_HEADERS)
    response.set_cookie(
        COOKIE,
        new_token(key),
        max_age=SESSION_S,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@open_router.post("/logout")
def sign_out(request: Request) -> Response:
    """Forget the session cookie."""
    response = RedirectResponse("/ui/key", status_code=303, headers=PAGE_HEADERS)
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
    return response


# -- the model browser -------------------------------------------------------------------------
Page = Annotated[int, Query(ge=1, le=10**6)]


@router.get("")
def names_page(request: Request, store: StoreDep, page: Page = 1) -> Response:
    """Every name: its type, versions, latest version and aliases."""
    rows, total = store.registry.name_summaries(PAGE_SIZE, (page - 1) * PAGE_SIZE)
    return render(
        request, "names.html", title="Models", rows=rows, total=total, page=page, size=PAGE_SIZE
    )


@router.get("/names/{name}")
def name_page(
    request: Request,
    store: StoreDep,
    name: Annotated[str, PathParam(pattern=NAME_PATTERN, max_length=64)],
    page: Page = 1,
) -> Response:
    """The versions of one name, newest first, with their aliases, tags and headline metric."""
    aliases = store.registry.aliases_of(name)  # 404 for an unknown name
    records, total = store.list_records(name=name, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    return render(
        request,
        "name.html",
        title=name,
        name=name,
        aliases=aliases,
        rows=[views.version_row(r) for r in records],
        total=total,
        page=page,
        size=PAGE_SIZE,
    )


@router.get("/models/{ref}")
def model_page(request: Request, ref: ModelRef, store: StoreDep) -> Response:
    """One model: record, metrics with the CV table, warnings, plots, posterior."""
    model_id = model_routes.resolved(ref, store, request)
    record = store.get_record(model_id)
    spec = request.app.state.model_types.get(record["model_type"])
    posterior = None
    if spec is not None and spec.posterior != "none":
        posterior = coefficient_summaries(store, model_id, DEFAULT_LEVEL)
    view = views.model_page(record, spec, posterior)
    title = f"{record['name']} v{record['version']}"
    return render(request, "model.html", title=title, **view)


PNG_HEADERS = {"Cache-Control": "private, max-age=300", "X-Content-Type-Options": "nosniff"}


@router.get("/models/{ref}/trace.png")
def trace_plot(
    request: Request,
    ref: ModelRef,
    store: StoreDep,
    coef: Annotated[str, Query(min_length=1, max_length=256)],
    class_label: Annotated[str | None, Query(alias="class", max_length=256)] = None,
) -> Response:
    """A coefficient's trace and density (``GET /models/{ref}/posterior/plot``)."""
    png = model_routes.get_posterior_plot(
        ref, store, request, coef, DEFAULT_LEVEL, "original", class_label
    )
    png.headers.update(PNG_HEADERS)
    return png


@router.get("/models/{ref}/{kind}.png")
async def plot(
    request: Request,
    ref: ModelRef,
    store: StoreDep,
    settings: SettingsDep,
    kind: Literal["roc", "boundary", "path", "compare"],
) -> Response:
    """One of the model's plots, as its ``/models/{ref}/{kind}.png`` route draws it."""
    if kind == "roc":
        png = await run_in_threadpool(plot_routes.get_roc_plot, ref, store, request)
    elif kind == "boundary":
        png = await run_in_threadpool(plot_routes.get_boundary_plot, ref, store, request)
    elif kind == "path":
        png = await plot_routes.get_path_plot(ref, store, settings, request, "standardised")
    else:
        png = await plot_routes.get_compare_plot(
            ref, store, settings, request, "original", DEFAULT_LEVEL
        )
    png.headers.update(PNG_HEADERS)
    return png


@router.get("/jobs")
def jobs_page(request: Request, jobs: JobsDep, page: Page = 1) -> Response:
    """Background trainings with their progress; reloads itself while any is queued or running."""
    items, total = jobs.list(status=None, name=None, limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    active = any(job["status"] in ("queued", "running") for job in items)
    rows = [
        {
            **job,
            "percent": round(100 * float(job.get("progress") or 0.0)),
            "url": views.model_url(job["model_id"]) if job.get("model_id") else None,
        }
        for job in items
    ]
    return render(
        request,
        "jobs.html",
        title="Jobs",
        rows=rows,
        total=total,
        page=page,
        size=PAGE_SIZE,
        refresh=JOBS_REFRESH_S if active else None,
    )


async def _sign_in_redirect(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    target = f"/ui/key?next={quote(exc.next_url, safe='/')}"
    return RedirectResponse(target, status_code=303, headers=PAGE_HEADERS)


def install_ui(app: FastAPI) -> None:
    """``GET /``, the ``/ui`` pages and their stylesheet."""
    app.include_router(home_router)
    app.include_router(open_router)
    app.include_router(router)
    app.mount(STATIC_URL, StaticFiles(directory=HERE / "static"), name="ui-static")
    app.add_exception_handler(SignInRequired, _sign_in_redirect)
