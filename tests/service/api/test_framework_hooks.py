"""The two private framework hooks, held to the dependency ranges they are tested against.

``service.api.telemetry_gate`` skips FastAPI's per-request telemetry probe (``_native_telemetry``)
and ``service.api.http_protocol`` overrides uvicorn's protocol methods for its parser-level 400.
``pyproject.toml`` bounds fastapi and uvicorn from above; these tests fail on a release outside
those bounds, or whose internals no longer have what the hooks lean on.
"""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from fastapi import FastAPI
from packaging.requirements import Requirement
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from service.api.http_protocol import EnvelopeH11Protocol, EnvelopeHttpToolsProtocol
from service.api.telemetry_gate import ServiceApp, settle_telemetry

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def declared(name: str) -> Requirement:
    """The requirement on ``name`` in the service extra of pyproject.toml."""
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    found = [Requirement(r) for r in extras["service"] if Requirement(r).name == name]
    assert len(found) == 1, name
    return found[0]


@pytest.mark.parametrize("name", ["fastapi", "uvicorn"])
def test_the_installed_release_is_inside_the_declared_range(name):
    requirement = declared(name)
    assert any(s.operator == "<" for s in requirement.specifier), f"{name} needs an upper bound"
    assert version(name) in requirement.specifier, (name, version(name), str(requirement))


def test_fastapi_still_asks_its_telemetry_probe_per_request():
    """The gate skips exactly this: ``FastAPI.__call__`` consulting ``_native_telemetry``."""
    source = inspect.getsource(FastAPI.__call__)
    assert "self._native_telemetry.enabled()" in source
    app = ServiceApp()
    assert callable(app._native_telemetry.enabled)
    assert settle_telemetry(app) is False and app.telemetry_off  # no provider in the tests


@pytest.mark.parametrize(
    ("ours", "theirs", "methods"),
    [
        (
            EnvelopeHttpToolsProtocol,
            HttpToolsProtocol,
            ["send_400_response", "data_received", "on_headers_complete", "on_message_complete"],
        ),
        (EnvelopeH11Protocol, H11Protocol, ["send_400_response"]),
    ],
)
def test_uvicorn_still_has_the_methods_the_envelope_protocols_override(ours, theirs, methods):
    for method in methods:
        theirs_method = getattr(theirs, method, None)
        assert theirs_method is not None, f"{theirs.__name__}.{method} is gone"
        assert getattr(ours, method) is not theirs_method  # overridden
        assert list(inspect.signature(theirs_method).parameters) == list(
            inspect.signature(getattr(ours, method)).parameters
        )
    if theirs is HttpToolsProtocol:
        source = inspect.getsource(HttpToolsProtocol)
        assert "self.url" in source and "self.headers" in source  # read by on_headers_complete
