"""A real uvicorn process: train, predict, restart, predict again; and the README's curl examples."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time

import httpx
import pytest
from sklearn.datasets import load_wine
from sklearn.preprocessing import StandardScaler

from tests.service.live_server import ROOT, live_server

pytestmark = pytest.mark.slow

#: KernelSVM is the model type the issue names.
MODEL_TYPE = "kernel_svm"
PARAMS = {"C": 1.0, "kernel": "rbf", "probability": True, "random_state": 0}
CURL_BLOCK = re.compile(r"```bash\n(.*?)```", re.DOTALL)
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def test_predictions_survive_a_restart(tmp_path):
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model_dir = tmp_path / "models"
    with live_server(model_dir, tmp_path) as url:
        trained = httpx.post(
            f"{url}/train",
            json={"model_type": MODEL_TYPE, "params": PARAMS, "X": X.tolist(), "y": y.tolist()},
            timeout=120,
        )
        assert trained.status_code == 201, trained.text
        model_id = trained.json()["model_id"]
        outputs = ["label", "decision", "probability"]
        request = {"model": model_id, "X": X[::7].tolist(), "outputs": outputs}
        before = httpx.post(f"{url}/predict", json=request, timeout=30)
        assert before.status_code == 200, before.text
    with live_server(model_dir, tmp_path) as url:
        assert httpx.get(f"{url}/models/{model_id}").json()["model_type"] == MODEL_TYPE
        after = httpx.post(f"{url}/predict", json=request, timeout=30)
    assert after.status_code == 200, after.text
    assert after.json() == before.json()
    body = after.json()
    assert body["model_id"] == model_id
    assert len(body["predictions"]) == len(request["X"])
    assert body["decision_function"] is not None
    accuracy = sum(p == t for p, t in zip(body["predictions"], y[::7], strict=True)) / len(
        body["predictions"]
    )
    assert accuracy > 0.9


def readme_examples() -> str:
    """The bash blocks between the README's curl-examples markers, in order."""
    text = (ROOT / "README.md").read_text()
    section = text.split("<!-- curl-examples:start -->")[1].split("<!-- curl-examples:end -->")[0]
    blocks = CURL_BLOCK.findall(section)
    assert len(blocks) >= 6, "README lost some of its curl examples"
    return "\n".join(blocks)


def readme_binary_example() -> str:
    """The README's Python block that sends binary tensor data."""
    (block,) = [b for b in PYTHON_BLOCK.findall((ROOT / "README.md").read_text()) if "binary" in b]
    return block


def wait_for(predicate, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_readme_curl_examples_run_against_a_live_server(tmp_path):
    assert shutil.which("curl"), "the README examples need curl on PATH"
    script = readme_examples()
    for needed in (
        "/train",
        "/predict",
        "text/csv",
        "background",
        "/jobs/",
        "/aliases/",
        "posterior",
        "posterior/plot",
        '"intervals"',
    ):
        assert needed in script
    with live_server(tmp_path / "models", tmp_path) as url:
        port = url.rsplit(":", 1)[1]
        result = subprocess.run(
            [
                "bash",
                "-c",
                "set -euo pipefail\n" + script.replace("localhost:8000", f"127.0.0.1:{port}"),
            ],
            capture_output=True,
            text=True,
            timeout=240,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        codes = re.findall(r'"code":"([A-Z_]+)"', result.stdout)
        # The only error the examples show is the posterior of a non-Bayesian model.
        assert codes == ["CONFLICT"], result.stdout
        assert '"predictions":["setosa","virginica"]' in result.stdout
        assert '"probabilities":[[' in result.stdout
        assert '"dropped_columns":["row_id","species"]' in result.stdout
        assert '"rhat":' in result.stdout and '"intervals":{' in result.stdout
        png = tmp_path / "coef.png"
        assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

        def two_versions() -> bool:
            return httpx.get(f"{url}/models", params={"name": "iris-demo"}).json()["total"] == 2

        wait_for(two_versions)
        stable = httpx.post(
            f"{url}/predict", json={"model": "iris-demo@stable", "X": [[5.0, 3.3]]}
        ).json()
        assert stable["version"] == 1
        assert httpx.get(f"{url}/models", params={"name": "iris-csv"}).json()["total"] == 1
        binary = readme_binary_example().replace("localhost:8000", f"127.0.0.1:{port}")
        printed = subprocess.run(
            [sys.executable, "-c", binary], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        assert printed.startswith("[{'name': 'label'") and "setosa" in printed, printed
