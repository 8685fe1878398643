"""The pages' session cookie: how a browser, which cannot send ``X-API-Key``, proves it knows a key.

The key form (``POST /ui/key``) checks the key as the API does and answers a cookie
``bsvm_ui=<expiry>.<HMAC-SHA256(key, "bsvm-ui-session:<expiry>")>``: HttpOnly (no script reads
it), SameSite=Strict (no other site's page sends it), ``Path=/ui`` (only the pages get it; the API
still wants the header), Secure when the request came over HTTPS. The token holds no key, so a
stolen cookie opens the pages until it expires (``SESSION_S``) and never the API; it is stateless,
so every worker and replica checks it alike, and it stops working when its key leaves
``BSVM_API_KEYS``.
"""

from __future__ import annotations

import hashlib
import hmac
import time

from service.settings import Settings

COOKIE = "bsvm_ui"
COOKIE_PATH = "/ui"
SESSION_S = 8 * 3600
"""How long a session lasts: a working day."""


def _mac(key: str, expires: int) -> str:
    return hmac.new(key.encode(), f"bsvm-ui-session:{expires}".encode(), hashlib.sha256).hexdigest()


def new_token(key: str, now: float | None = None) -> str:
    """The cookie value for ``key`` (already checked), valid for ``SESSION_S``."""
    expires = int(now if now is not None else time.time()) + SESSION_S
    return f"{expires}.{_mac(key, expires)}"


def token_is_valid(settings: Settings, token: str | None, now: float | None = None) -> bool:
    """True when ``token`` was made from one of the configured keys and has not expired."""
    if not token or not settings.api_keys:
        return False
    expires_text, _, mac = token.partition(".")
    if not expires_text.isascii() or not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expires = int(expires_text)
    moment = now if now is not None else time.time()
    if not moment < expires <= moment + SESSION_S:
        return False
    given = mac.encode()
    matched = False
    for key in settings.api_keys:
        matched |= hmac.compare_digest(given, _mac(key, expires).encode())
    return matched
