"""The image, built from the repository's Dockerfile with podman and run as a user would run it.

Image registries are out of reach, so ``FROM python:3.11-slim`` is a local stand-in: Debian
bookworm's ``python3`` by ``mmdebstrap``, imported as ``localhost/python:3.11-slim`` (kept in
podman's storage, so a machine that keeps it builds it once). podman runs with runc and
``default_ulimits`` within this machine's hard limits, from a ``containers.conf`` of this test
passed by ``CONTAINERS_CONF`` (the system's own configuration is not touched). The build uses
``--format docker`` (the OCI format drops ``HEALTHCHECK``) and the host's network and CA bundle, so
pip reaches the package index. Every container runs with ``--network host`` and the server bound
to 127.0.0.1 on a free port: traffic stays on loopback and no network setting of the machine
changes (podman's bridge would add addresses, forwarding and firewall rules).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.service.app.test_live import readme_examples
from tests.service.live_server import ROOT, free_port

pytestmark = pytest.mark.slow

BASE = "python:3.11-slim"  # the Dockerfile's FROM, and Debian bookworm's python3
STAND_IN = f"localhost/{BASE}"
IMAGE = "localhost/bsvm:test"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
READY_TIMEOUT_S = 60.0
API_KEY = "container-test-key"


def run(env: dict[str, str], *args: str, timeout: float = 120, check: bool = True) -> Any:
    """``podman *args``; its output on failure."""
    result = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert result.returncode == 0, f"podman {' '.join(args)}:\n{result.stdout}{result.stderr}"
    return result


def hard_limit(which: int, cap: int) -> int:
    hard = resource.getrlimit(which)[1]
    return cap if hard == resource.RLIM_INFINITY else min(hard, cap)


@pytest.fixture(scope="module")
def podman(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of every podman command: runc and ulimits this machine allows."""
    for tool in ("podman", "runc", "mmdebstrap"):
        assert shutil.which(tool), f"{tool} missing: scripts/test.sh installs it (apt-get)"
    nofile = hard_limit(resource.RLIMIT_NOFILE, 1 << 20)
    nproc = hard_limit(resource.RLIMIT_NPROC, 32768)
    conf = tmp_path_factory.mktemp("podman") / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
    )
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def debian_mirror() -> str:
    """The Debian mirror this machine's apt uses (the one CI can reach), else deb.debian.org."""
    if HOST_SOURCES.exists():
        for uri in re.findall(r"^URIs:\s*(\S+)", HOST_SOURCES.read_text(), re.M):
            if uri.rstrip("/").endswith("/debian"):
                return uri
    return DEBIAN_MIRROR


def build_stand_in(env: dict[str, str], workdir: Path) -> None:
    """Debian bookworm with python3 and pip (pip may install system-wide) as ``STAND_IN``,
    without documentation (as the slim images)."""
    tarball = workdir / "base.tar"
    subprocess.run(
        [
            "mmdebstrap",
            "--quiet",
            "--variant=minbase",
            "--include=python3,python3-pip,python-is-python3,ca-certificates",
            "--dpkgopt=path-exclude=/usr/share/doc/*",
            "--dpkgopt=path-exclude=/usr/share/man/*",
            "--dpkgopt=path-exclude=/usr/share/locale/*",
            '--customize-hook=rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED',
            "bookworm",
            str(tarball),
            debian_mirror(),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    run(env, "import", "--change", 'CMD ["python3"]', str(tarball), STAND_IN, timeout=300)
    tarball.unlink()


@pytest.fixture(scope="module")
def image(podman: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> str:
    """The repository's Dockerfile built on the stand-in base (built once per machine)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    bases = re.findall(r"^FROM (\S+)", dockerfile, re.M)
    assert bases and set(bases) == {BASE}, f"the stand-in base is {BASE}, the Dockerfile {bases}"
    if run(podman, "image", "exists", STAND_IN, check=False).returncode != 0:
        build_stand_in(podman, tmp_path_factory.mktemp("base"))
    ca = ["--volume", f"{HOST_CA}:{HOST_CA}:ro"] if HOST_CA.exists() else []
    build = ("build", "--format", "docker", "--network", "host", "--pull=never", *ca)
    run(podman, *build, "--tag", IMAGE, str(ROOT), timeout=600)
    return IMAGE


@pytest.fixture(scope="module")
def volume(podman: dict[str, str]) -> Iterator[str]:
    name = f"bsvm-test-{uuid.uuid4().hex[:12]}"
    run(podman, "volume", "create", name)
    yield name
    run(podman, "volume", "rm", "--force", name, check=False)


@contextmanager
def container(env: dict[str, str], *options: str, **settings: str) -> Iterator[tuple[str, str]]:
    """A server container on the host's network, bound to 127.0.0.1 on a free port: its name
    and base URL (removed on exit)."""
    name = f"bsvm-test-{uuid.uuid4().hex[:12]}"
    port = free_port()
    variables = {"BSVM_HOST": "127.0.0.1", "BSVM_PORT": str(port), **settings}
    flags = [arg for key, value in variables.items() for arg in ("--env", f"{key}={value}")]
    # no health-check timer (it needs systemd); `podman healthcheck run` still runs the check
    common = ("--name", name, "--network", "host", "--health-interval", "disable")
    run(env, "run", "--detach", *common, *flags, *options, IMAGE)
    try:
        yield name, f"http://127.0.0.1:{port}"
    finally:
        run(env, "rm", "--force", "--time", "0", name, check=False)


def wait_ready(env: dict[str, str], name: str, url: str) -> float:
    """Seconds until ``/health/ready`` answers 200; fails with the logs if the container stops."""
    start = time.monotonic()
    while time.monotonic() - start < READY_TIMEOUT_S:
        try:
            if httpx.get(f"{url}/health/ready", timeout=2).status_code == 200:
                return time.monotonic() - start
        except httpx.TransportError:
            pass
        state = run(env, "inspect", "--format", "{{.State.Running}}", name).stdout.strip()
        assert state == "true", run(env, "logs", name).stderr
        time.sleep(0.1)
    pytest.fail(f"not ready after {READY_TIMEOUT_S} s:\n{run(env, 'logs', name).stderr}")


def exit_code(env: dict[str, str], name: str) -> int:
    return int(run(env, "inspect", "--format", "{{.State.ExitCode}}", name).stdout)


def constraints() -> dict[str, str]:
    """constraints.txt as {normalised name: version}."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep:
            pins[re.sub(r"[-_.]+", "-", name.split("[")[0]).lower()] = version
    return pins


def test_the_image_runs_the_installed_package_at_the_versions_ci_tested(podman, image):
    script = (
        "import json, importlib.metadata as m, service; "
        "print(json.dumps({'file': service.__file__, 'versions': "
        "{d.metadata['Name']: d.version for d in m.distributions()}}))"
    )
    out = run(podman, "run", "--rm", "--network", "none", image, "python", "-c", script).stdout
    found = json.loads(out)
    assert re.search(r"/(site|dist)-packages/service/__init__\.py$", found["file"]), found["file"]
    installed = {re.sub(r"[-_.]+", "-", k).lower(): v for k, v in found["versions"].items()}
    pins = constraints()
    assert installed["python-dateutil"] == pins["python-dateutil"]  # the example
    differ = {k: (v, pins[k]) for k, v in installed.items() if k in pins and pins[k] != v}
    assert not differ, f"installed vs constraints.txt: {differ}"


@pytest.fixture(scope="module")
def shared() -> dict[str, Any]:
    """What the first container leaves for the second (module order: first, then second)."""
    return {}


def test_the_server_in_the_image(podman, image, volume, shared, tmp_path):
    """Ready, healthy, not root, the README's curl examples, then SIGTERM: status 0."""
    assert shutil.which("curl"), "the README examples need curl on PATH"
    with container(podman, "--volume", f"{volume}:/data") as (name, url):
        shared["ready_s"] = wait_ready(podman, name, url)
        run(podman, "healthcheck", "run", name)  # exit 0: healthy
        status = run(podman, "exec", name, "cat", "/proc/1/status").stdout
        assert re.search(r"^Uid:\s+10001\s+10001\s", status, re.M), status
        port = url.rsplit(":", 1)[1]
        script = "set -euo pipefail\n" + readme_examples().replace(
            "localhost:8000", f"127.0.0.1:{port}"
        )
        result = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, timeout=240, cwd=tmp_path
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert '"predictions":["setosa","virginica"]' in result.stdout
        deadline = time.monotonic() + 90  # the README's background training
        while httpx.get(f"{url}/models", params={"name": "iris-demo"}).json()["total"] < 2:
            assert time.monotonic() < deadline, "the background training did not finish"
            time.sleep(0.2)
        shared["models"] = httpx.get(f"{url}/models", params={"limit": 1000}).json()["total"]
        start = time.monotonic()
        run(podman, "stop", "--time", "20", name)  # SIGTERM, SIGKILL after 20 s
        shared["stop_s"] = time.monotonic() - start
        assert exit_code(podman, name) == 0, run(podman, "logs", name).stderr
        assert shared["stop_s"] < 15


def test_a_second_container_on_the_volume_read_only_with_api_keys(podman, image, volume, shared):
    """The models outlive their container; the root file system may be read-only; keys hold."""
    assert shared.get("models"), "runs after test_the_server_in_the_image"
    options = ("--read-only", "--volume", f"{volume}:/data")
    with container(podman, *options, BSVM_API_KEYS=API_KEY) as (name, url):
        wait_ready(podman, name, url)  # the probes need no key
        assert httpx.get(f"{url}/models").status_code == 401
        key = {"X-API-Key": API_KEY}
        listed = httpx.get(f"{url}/models", params={"limit": 1000}, headers=key)
        assert listed.status_code == 200 and listed.json()["total"] == shared["models"]
        stable = httpx.post(
            f"{url}/predict", json={"model": "iris-demo@stable", "X": [[5.0, 3.3]]}, headers=key
        )
        assert stable.status_code == 200 and stable.json()["version"] == 1, stable.text
        # a training writes its artifact and row on the volume, its plots' cache under /tmp
        body = {"model_type": "lda", "name": "read-only", "X": [[0, 0], [0, 1], [4, 4], [4, 5]]}
        trained = httpx.post(f"{url}/train", json={**body, "y": [0, 0, 1, 1]}, headers=key)
        assert trained.status_code == 201, trained.text
        plot = httpx.get(f"{url}/models/{trained.json()['model_id']}/boundary.png", headers=key)
        assert plot.status_code == 200 and plot.content.startswith(b"\x89PNG")


def test_a_data_folder_it_cannot_write_ends_the_container(podman, image, tmp_path):
    """A bind-mounted folder owned by root: status 1 after the retry, one log line naming it."""
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    options = ("--volume", f"{folder}:/data")
    with container(podman, *options, BSVM_STARTUP_TIMEOUT_S="2") as (name, _):
        assert run(podman, "wait", name, timeout=60).stdout.strip() == "1"
        logs = run(podman, "logs", name)
    (line,) = (logs.stdout + logs.stderr).splitlines()
    record = json.loads(line)
    assert record["level"] == "CRITICAL"
    message = record["message"]
    assert message.startswith("cannot start: the data folder /data is not usable: PermissionError")
    assert "BSVM_STARTUP_TIMEOUT_S=2" in message
