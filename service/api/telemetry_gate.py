"""FastAPI without its per-request OpenTelemetry probe when no provider is configured.

FastAPI (0.16x) asks on every HTTP request whether a tracer, meter or logger provider is
configured (``NativeTelemetry.enabled``: three provider lookups, about 5 µs alone and 10 µs inside
a request). Providers are set up before the app serves: by ``opentelemetry-instrument`` or the
program before the app is built, or by FastAPI itself at lifespan startup when
``FASTAPI_OTEL_AUTO_CONFIGURE=true``. So ``settle_telemetry`` asks once, at the end of startup,
and ``ServiceApp`` skips the probe for HTTP requests when the answer was no. With a provider
configured, or before startup has run, every request goes through FastAPI unchanged.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send


class ServiceApp(FastAPI):
    """``FastAPI`` whose HTTP requests skip the telemetry probe once ``telemetry_off`` is set."""

    telemetry_off: bool = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.telemetry_off and scope["type"] == "http":
            if self.root_path:
                scope["root_path"] = self.root_path
            await Starlette.__call__(self, scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def settle_telemetry(app: ServiceApp) -> bool:
    """Ask FastAPI once whether telemetry is on; skip its probe from now on if not. Whether on.

    A FastAPI without native telemetry (no ``_native_telemetry``) is left to itself.
    """
    native = getattr(app, "_native_telemetry", None)
    enabled = native is None or bool(native.enabled())
    app.telemetry_off = not enabled
    return enabled
