"""The allow-list: every normalisation trick refused before the store is touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from service.data.locations import check_location, normalise_uri, storage_options
from service.errors import InvalidInput
from service.settings import Settings


def refused(uri: str, settings: Settings) -> str:
    with pytest.raises(InvalidInput) as info:
        check_location(uri, settings)
    (problem,) = info.value.details
    assert problem.field == "data.uri"
    return problem.problem


@pytest.fixture()
def allowed(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "x.csv").write_text("a,b\n1,2\n")
    os.symlink(tmp_path / "secret", tmp_path / "in" / "link")
    return tmp_path


def test_empty_setting_turns_data_by_reference_off(tmp_path: Path) -> None:
    problem = refused(f"file://{tmp_path}/x.csv", Settings(data_dir=tmp_path))
    assert "BSVM_DATA_URLS" in problem and "off" in problem


@pytest.mark.parametrize(
    "tail",
    [
        "in/../secret/x.csv",
        "in/%2e%2e/secret/x.csv",
        "in/%2E%2E%2Fsecret/x.csv",
        "in/./../secret/",
        "in//..//secret/x.csv",
        "inside/x.csv",
        "secret/x.csv",
    ],
)
def test_paths_leaving_the_prefix_are_refused_without_a_stat(
    allowed: Path, tail: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(data_dir=allowed, data_urls=f"file://{allowed}/in/")
    stats: list[str] = []
    real_stat, real_lstat = os.stat, os.lstat
    monkeypatch.setattr(
        os, "stat", lambda p, *a, **k: stats.append(str(p)) or real_stat(p, *a, **k)
    )
    monkeypatch.setattr(
        os, "lstat", lambda p, *a, **k: stats.append(str(p)) or real_lstat(p, *a, **k)
    )
    problem = refused(f"file://{allowed}/{tail}", settings)
    assert "outside every allowed location" in problem
    assert not [s for s in stats if "secret" in s or "inside" in s]


def test_a_symlink_out_of_the_prefix_is_refused(allowed: Path) -> None:
    settings = Settings(data_dir=allowed, data_urls=f"file://{allowed}/in/")
    assert "leads outside" in refused(f"file://{allowed}/in/link/x.csv", settings)


@pytest.mark.parametrize(
    "uri",
    [
        "http://example.com/x.csv",
        "https://bucket.s3.amazonaws.com/in/x",
        "gs://bucket/in/x",
        "s3://key:secret@bucket/in/x",
        "s3://bucket/in/x?versionId=1",
        "s3://bucket/in/x#frag",
        "s3://bucket/in/x%00",
        "file://otherhost/in/x",
        "file:relative/x",
        "/in/x.csv",
        "s3://bucket/in\\..\\secret",
    ],
)
def test_other_schemes_and_tricks_are_refused(uri: str, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, data_urls="s3://bucket/in/,file:///in/")
    refused(uri, settings)


def test_s3_prefixes_are_folders(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, data_urls="s3://bucket/in")
    assert (
        check_location("s3://bucket/in/a/*.parquet", settings).url == "s3://bucket/in/a/*.parquet"
    )
    assert check_location("S3://bucket/in/x/../y", settings).url == "s3://bucket/in/y"
    assert "outside" in refused("s3://bucket/inside/x", settings)
    assert "outside" in refused("s3://bucket/in/../out/x", settings)
    assert "outside" in refused("s3://other/in/x", settings)


def test_normalisation_keeps_a_prefix_a_prefix() -> None:
    assert normalise_uri("s3://bucket/a//b/").path == "bucket/a/b/"
    assert normalise_uri("file:///a/./b/../c").path == "/a/c"
    assert normalise_uri("file://localhost/a").path == "/a"


def test_credentials_come_from_the_server_only(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, s3_endpoint_url="http://127.0.0.1:9")
    assert storage_options("s3", settings) == {"endpoint_url": "http://127.0.0.1:9"}
    assert storage_options("file", settings) == {}
