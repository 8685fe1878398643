"""API-key authentication: ``X-API-Key`` checked in constant time against ``BSVM_API_KEYS``.

Which paths are open: ``/health/*`` and ``/v2/health/*`` (probes) always; ``/docs`` (and its local assets) and
``/openapi.json`` while ``BSVM_PUBLIC_DOCS`` is true (the default), because a browser cannot send
a header when it opens the Swagger UI, and the document holds the contract, not data. Set
``BSVM_PUBLIC_DOCS=false`` to put them behind the key like every other route. ``/`` (a page of
links) is open, and so are ``/ui/*`` here: the pages check the key themselves, from the header or
the session cookie of their key form (``service.api.ui``), so that a browser without one is sent
to the form rather than answered a JSON 401.

The check runs in the request middleware, before the body is read (so an unauthenticated caller
cannot make the server buffer a large body), and again as the ``require_api_key`` dependency of
every protected router, which is also what declares the scheme in the OpenAPI document.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import APIKeyHeader

from service.errors import Unauthorized
from service.settings import Settings

API_KEY_HEADER = "X-API-Key"
OPEN_PREFIXES = ("/health/", "/v2/health/")
DOCS_PREFIXES = ("/docs", "/openapi.json")
PAGES_PREFIX = "/ui"

api_key_scheme = APIKeyHeader(
    name=API_KEY_HEADER,
    auto_error=False,
    description="One of the keys in BSVM_API_KEYS (only required when that is set).",
)


def key_is_valid(settings: Settings, key: str | None) -> bool:
    """True when no keys are configured or ``key`` equals one of them (constant-time compare)."""
    if not settings.api_keys:
        return True
    if not key:
        return False
    given = key.encode()
    matched = False
    for expected in settings.api_keys:
        matched |= hmac.compare_digest(given, expected.encode())
    return matched


def path_is_open(settings: Settings, path: str) -> bool:
    """True for paths that never need a key."""
    if path.startswith(OPEN_PREFIXES) or path == "/":
        return True
    if path == PAGES_PREFIX or path.startswith(PAGES_PREFIX + "/"):
        return True  # the pages' own dependency checks the key or the session cookie
    return settings.public_docs and path.startswith(DOCS_PREFIXES)


def check_api_key(settings: Settings, path: str, key: str | None) -> None:
    """Raise ``Unauthorized`` unless ``path`` is open or ``key`` is valid."""
    if not settings.api_keys:  # none configured: every key is valid (``key_is_valid``)
        return
    if path_is_open(settings, path) or key_is_valid(settings, key):
        return
    message = "missing API key" if not key else "invalid API key"
    raise Unauthorized(
        f"{message}: send one of the configured keys in the {API_KEY_HEADER} header",
        headers={"WWW-Authenticate": API_KEY_HEADER},
    )


def require_api_key(
    request: Request, key: Annotated[str | None, Security(api_key_scheme)] = None
) -> None:
    """Dependency of every protected router: 401 unless the key is valid."""
    check_api_key(request.app.state.settings, request.url.path, key)
