"""``python -m service``: uvicorn gets the app factory and BSVM_HOST, BSVM_PORT, BSVM_WORKERS."""

from __future__ import annotations

from typing import Any

import uvicorn

import service.__main__ as serve


def test_main_starts_the_configured_number_of_workers(monkeypatch):
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: calls.append((a, kw)))
    for key, value in {"BSVM_HOST": "0.0.0.0", "BSVM_PORT": "8123", "BSVM_WORKERS": "3"}.items():
        monkeypatch.setenv(key, value)
    serve.main()
    ((args, kwargs),) = calls
    # several workers need an import string: each process builds its own app from the factory
    assert args == ("service.api.app:create_app",) and kwargs["factory"] is True
    assert (kwargs["host"], kwargs["port"], kwargs["workers"]) == ("0.0.0.0", 8123, 3)


def test_one_worker_by_default(monkeypatch):
    monkeypatch.delenv("BSVM_WORKERS", raising=False)
    assert serve.uvicorn_options(serve.Settings())["workers"] == 1
