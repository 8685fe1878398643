"""schemathesis against a live server: no 5xx, no response outside the OpenAPI document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.service.live_server import live_server

pytestmark = pytest.mark.slow

API_KEY = "schemathesis-key"
SEED = "20240601"
MAX_EXAMPLES = "20"
CHECKS = ",".join(
    (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
    )
)


def schemathesis_cli() -> Path:
    return Path(sys.executable).parent / "schemathesis"


def test_schemathesis_finds_no_server_error_and_no_schema_violation(tmp_path):
    headers = {"X-API-Key": API_KEY}
    settings = {"api_keys": API_KEY, "train_timeout_s": "20", "max_rows": "2000"}
    with live_server(tmp_path / "models", tmp_path, **settings) as url:
        seeded = httpx.post(
            f"{url}/train",
            headers=headers,
            json={
                "model_type": "lda",
                "name": "seeded",
                "X": [[0, 1], [1, 0], [0, 2], [2, 0]],
                "y": [0, 1, 0, 1],
            },
            timeout=120,
        )
        assert seeded.status_code == 201, seeded.text
        # The coverage phase turns every valid example body into a hundred valid variants, each a
        # training: without /train's examples (one per model type, for Swagger UI; tested in
        # test_examples.py) the run stays short.
        doc = httpx.get(f"{url}/openapi.json", headers=headers).json()
        train = doc["paths"]["/train"]["post"]
        for media in train["requestBody"]["content"].values():
            media.pop("examples", None)
            media.pop("example", None)
        for parameter in train["parameters"]:
            parameter.pop("example", None)
        spec = tmp_path / "openapi.json"
        spec.write_text(json.dumps(doc))
        config = tmp_path / "schemathesis.toml"
        config.write_text(
            "[parameters]\n"
            f'"path.model_id" = "{seeded.json()["model_id"]}"\n'
            '"path.name" = "seeded"\n'
        )
        result = subprocess.run(
            [
                str(schemathesis_cli()),
                "--config-file",
                str(config),
                "run",
                str(spec),
                "--url",
                url,
                "--checks",
                CHECKS,
                "--seed",
                SEED,
                "--max-examples",
                MAX_EXAMPLES,
                "--phases",
                "coverage,fuzzing",
                "--workers",
                "1",
                "--no-shrink",
                "--request-timeout",
                "60",
                "--header",
                f"X-API-Key: {API_KEY}",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert "passed" in result.stdout
