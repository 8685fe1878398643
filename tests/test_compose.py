"""compose.yaml, the scaled set-up: its BSVM_* names are real settings and its parts fit together.

Checked without a Docker engine: the file is parsed with PyYAML (which resolves the ``<<`` merge
keys the file uses) and the wiring between services is compared.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
SETTING_NAMES = {f"BSVM_{name.upper()}" for name in Settings.model_fields}


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment in its mapping or its ``KEY=value`` list form."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def command_text(service: dict[str, Any]) -> str:
    parts = []
    for key in ("entrypoint", "command"):
        value = service.get(key) or []
        parts += value if isinstance(value, list) else [value]
    return " ".join(map(str, parts))


def built_from_dockerfile(service: dict[str, Any]) -> bool:
    build = service.get("build")
    return isinstance(build, dict) and build.get("dockerfile", "Dockerfile") == "Dockerfile"


@pytest.fixture(scope="module")
def replicas(services) -> dict[str, dict[str, str]]:
    """The server replicas: built from the Dockerfile, running the default command."""
    return {
        name: environment(s)
        for name, s in services.items()
        if built_from_dockerfile(s) and "command" not in s
    }


def test_every_bsvm_variable_is_a_setting(services):
    raw = (ROOT / "compose.yaml").read_text()
    named = set(re.findall(r"\bBSVM_[A-Z0-9_]+", raw))
    in_env = {k for s in services.values() for k in environment(s) if k.startswith("BSVM_")}
    assert in_env and in_env <= named
    # BSVM_* variables of the host that the file interpolates are settings too
    assert named <= SETTING_NAMES, sorted(named - SETTING_NAMES)


def test_two_replicas_share_database_artifacts_cluster_and_key(replicas):
    assert len(replicas) >= 2
    shared = (
        "BSVM_DATABASE_URL",
        "BSVM_ARTIFACT_URL",
        "BSVM_S3_ENDPOINT_URL",
        "BSVM_DASK_SCHEDULER",
        "BSVM_SIGNING_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    )
    for key in shared:
        values = {env.get(key) for env in replicas.values()}
        assert len(values) == 1 and None not in values, key
    env = next(iter(replicas.values()))
    assert env["BSVM_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert env["BSVM_ARTIFACT_URL"].startswith("s3://")


def test_the_replicas_point_at_services_of_the_file(services, replicas):
    env = next(iter(replicas.values()))
    database = urlsplit(env["BSVM_DATABASE_URL"])
    assert services[database.hostname]["image"].startswith("postgres:16")
    assert database.path.lstrip("/") == environment(services[database.hostname])["POSTGRES_DB"]
    s3 = urlsplit(env["BSVM_S3_ENDPOINT_URL"])
    assert "minio" in services[s3.hostname]["image"]
    scheduler = urlsplit(env["BSVM_DASK_SCHEDULER"])
    assert "dask scheduler" in command_text(services[scheduler.hostname])
    assert f"--port {scheduler.port}" in command_text(services[scheduler.hostname])


def test_the_artifact_bucket_is_created_with_mc(services, replicas):
    bucket = urlsplit(next(iter(replicas.values()))["BSVM_ARTIFACT_URL"]).hostname
    init = [s for s in services.values() if re.search(rf"\bmc mb\b.*/{bucket}\b", command_text(s))]
    assert len(init) == 1 and "minio/mc" in init[0]["image"]
    for replica in (services[name] for name in replicas):
        assert replica["depends_on"]["minio-init"]["condition"] == "service_completed_successfully"


def test_s3_credentials_are_minio_root_credentials(services, replicas):
    minio = next(s for s in services.values() if "minio/minio" in s.get("image", ""))
    for env in replicas.values():
        assert env["AWS_ACCESS_KEY_ID"] == environment(minio)["MINIO_ROOT_USER"]
        assert env["AWS_SECRET_ACCESS_KEY"] == environment(minio)["MINIO_ROOT_PASSWORD"]


def test_dask_workers_run_the_bsvm_image_and_may_start_processes(services, replicas):
    address = next(iter(replicas.values()))["BSVM_DASK_SCHEDULER"]
    workers = [s for s in services.values() if "dask worker" in command_text(s)]
    assert workers
    for worker in workers:
        assert address in command_text(worker)
        assert built_from_dockerfile(worker)  # unpickles bsvm tasks; same dask version
        assert environment(worker)["DASK_DISTRIBUTED__WORKER__DAEMON"] == "False"


def test_the_image_is_built_with_the_extras_the_set_up_needs(services):
    for service in services.values():
        if built_from_dockerfile(service):
            extras = set(service["build"]["args"]["EXTRAS"].split(","))
            assert {"service", "s3", "dask", "postgres"} <= extras


def test_no_secret_is_written_in_the_file():
    raw = (ROOT / "compose.yaml").read_text()
    assert re.search(r"BSVM_SIGNING_KEY: \$\{BSVM_SIGNING_KEY:\?", raw)  # required from the host


def test_the_readme_documents_exactly_the_settings():
    """Every BSVM_* the README names is a setting, and every setting is in its table."""
    readme = (ROOT / "README.md").read_text()
    server = readme[readme.index("## The model server") :]  # the core's test knobs come before
    named = set(re.findall(r"`(BSVM_[A-Z0-9_]+)`", server))
    settings = {f"BSVM_{name.upper()}" for name in Settings.model_fields}
    assert named <= settings, named - settings
    rows = [line for line in readme.splitlines() if line.startswith("| `BSVM_")]
    documented = {name for row in rows for name in re.findall(r"`(BSVM_[A-Z0-9_]+)`", row)}
    assert settings <= documented, settings - documented


def test_nginx_resolves_the_replicas_again_while_it_runs(services, replicas):
    """A restarted replica may come back on a new address: nginx must look its name up again
    (``resolve`` on each upstream server, with a ``resolver``), not keep the address of its start."""
    (lb,) = [s for s in services.values() if s.get("image", "").startswith("nginx:")]
    major, minor = (int(part) for part in lb["image"].split(":")[1].split("-")[0].split(".")[:2])
    assert (major, minor) >= (1, 28)  # `resolve` in an upstream: open-source nginx since 1.27.3
    (config,) = lb["configs"]
    # the image's entrypoint fills a template in with the container's DNS servers
    assert config["target"] == "/etc/nginx/templates/default.conf.template"
    assert environment(lb)["NGINX_ENTRYPOINT_LOCAL_RESOLVERS"] == "1"
    raw = yaml.safe_load((ROOT / "compose.yaml").read_text())
    template = raw["configs"][config["source"]]["content"]
    # compose turns $$ into $; nginx's entrypoint then substitutes ${NGINX_LOCAL_RESOLVERS}
    assert re.search(r"^resolver \$\$\{NGINX_LOCAL_RESOLVERS\} valid=\d+s;$", template, re.M)
    upstream = re.search(r"upstream (\w+) \{(.*?)\}", template, re.S)
    assert upstream is not None and f"proxy_pass http://{upstream[1]};" in template
    assert re.search(r"^\s*zone \w+ \d+k;$", upstream[2], re.M)  # `resolve` needs shared memory
    servers = re.findall(r"^\s*server (\S+) resolve;$", upstream[2], re.M)
    assert sorted(servers) == sorted(f"{name}:8000" for name in replicas)
