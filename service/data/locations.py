"""Where data by reference may live: the allow-list of ``BSVM_DATA_URLS`` and URI normalisation.

A URI from a request is normalised *lexically* first (no I/O): the scheme lower-cased and only
``s3`` or ``file`` accepted, percent-escapes decoded, ``.`` and ``..`` segments resolved, repeated
slashes collapsed; a URI with credentials (``user:pw@``), a query (``?``), a fragment (``#``),
a backslash or a control character is refused. The normalised URI must then lie under one of the
allowed prefixes (each a folder: ``s3://bucket/in`` allows ``s3://bucket/in/...``, never
``s3://bucket/inside``). Only then, and only for ``file://``, are symlinks resolved
(``os.path.realpath``) and the result checked again, so a refused path is never stat'ed and a link
inside an allowed folder cannot lead out of it. Every file a glob or prefix expands to is checked
the same way (``check_resolved``, in ``sources.py``).

Credentials come from the server (``AWS_*`` variables, ``BSVM_S3_ENDPOINT_URL``), never from a
request: ``storage_options`` gives the only options a filesystem is built with.

Every refusal is an ``InvalidInput`` (422) naming the request's field (``data.uri`` by default).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from service.errors import InvalidInput, detail
from service.settings import Settings

SCHEMES = ("s3", "file")
GLOB_CHARS = "*["
SETTING = "BSVM_DATA_URLS"
BUCKET_PATTERN = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\?#]")


@dataclass(frozen=True)
class DataUri:
    """A normalised ``s3://`` or ``file://`` URI.

    ``path`` is what fsspec takes: ``bucket/key...`` for s3, an absolute path for file. A trailing
    ``/`` (a prefix: every object under it) is kept.
    """

    scheme: str
    path: str

    @property
    def url(self) -> str:
        """The URI as text: ``s3://bucket/key`` or ``file:///abs/path``."""
        return f"{self.scheme}://{self.path}"

    @property
    def is_prefix(self) -> bool:
        """True for a folder or key prefix ending in ``/`` (every object under it)."""
        return self.path.endswith("/")

    @property
    def is_glob(self) -> bool:
        """True when the path holds glob characters (``*``, ``**``, ``[...]``)."""
        return any(c in self.path for c in GLOB_CHARS)


def _refuse(field: str, problem: str) -> InvalidInput:
    return InvalidInput("data location refused", [detail(field, problem)])


def normalise_uri(uri: str, field: str = "data.uri") -> DataUri:
    """``uri`` normalised lexically (see the module notes); 422 naming ``field`` when malformed.

    No I/O: nothing is stat'ed or listed.
    """
    scheme, sep, rest = uri.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        raise _refuse(field, "must be an s3:// or file:// URI")
    if FORBIDDEN.search(rest):
        raise _refuse(field, "must not hold a query, fragment, backslash or control character")
    try:
        decoded = unquote(rest, errors="strict")
    except UnicodeDecodeError:
        raise _refuse(field, "holds percent-escapes that are not UTF-8") from None
    if FORBIDDEN.search(decoded) or "%" in decoded:
        raise _refuse(field, "must not hold escaped control characters or double escapes")
    trailing = decoded.endswith("/")
    if scheme == "file":
        if decoded.startswith("localhost/"):
            decoded = decoded[len("localhost") :]
        if not decoded.startswith("/"):
            raise _refuse(field, "a file:// URI must hold an absolute path (file:///path)")
        path = posixpath.normpath("/" + decoded.lstrip("/"))
    else:
        bucket, _, key = decoded.partition("/")
        if not BUCKET_PATTERN.match(bucket):
            raise _refuse(field, "must name a valid bucket (no credentials, ports or escapes)")
        key = posixpath.normpath("/" + key) if key else "/"
        if key.startswith("//"):
            key = "/" + key.lstrip("/")
        path = bucket + key.rstrip("/") if key != "/" else bucket
    if trailing and not path.endswith("/"):
        path += "/"
    return DataUri(scheme, path)


def allowed_prefixes(settings: Settings) -> list[DataUri]:
    """The allow-list of ``BSVM_DATA_URLS``, each normalised and ending in ``/``."""
    prefixes = []
    for url in settings.data_urls:
        prefix = normalise_uri(url, field=SETTING)
        if not prefix.is_prefix:
            prefix = DataUri(prefix.scheme, prefix.path + "/")
        prefixes.append(prefix)
    return prefixes


def under(uri: DataUri, prefixes: list[DataUri]) -> bool:
    """True when ``uri`` lies under one of ``prefixes`` (the prefix folder itself included)."""
    path = uri.path if uri.is_prefix else uri.path + "/"
    return any(uri.scheme == prefix.scheme and path.startswith(prefix.path) for prefix in prefixes)


def _real(uri: DataUri) -> DataUri:
    """A ``file://`` URI with its symlinks resolved (touches the filesystem); s3 unchanged."""
    if uri.scheme != "file":
        return uri
    path = os.path.realpath(uri.path)
    if uri.is_prefix and not path.endswith("/"):
        path += "/"
    return DataUri("file", path)


def check_location(uri: str, settings: Settings, field: str = "data.uri") -> DataUri:
    """``uri`` normalised and checked against ``BSVM_DATA_URLS`` (422 naming ``field``).

    Data by reference is off while the setting is empty. A URI outside every prefix is refused
    before any I/O; a ``file://`` URI inside one is then resolved (symlinks) and checked again.
    """
    prefixes = allowed_prefixes(settings)
    if not prefixes:
        raise InvalidInput(
            "data by reference is off",
            [detail(field, f"data by reference is turned off on this server ({SETTING} is empty)")],
        )
    normal = normalise_uri(uri, field)
    if not under(normal, prefixes):
        raise _refuse(field, f"{normal.url} is outside every allowed location ({SETTING})")
    check_resolved(normal, settings, field)
    return normal


def check_resolved(uri: DataUri, settings: Settings, field: str = "data.uri") -> None:
    """422 unless ``uri``, its symlinks resolved, lies under an allowed prefix (also resolved).

    For a URI already known to be lexically inside the allow-list (it may be stat'ed).
    """
    if uri.scheme != "file":
        return
    resolved = [_real(prefix) for prefix in allowed_prefixes(settings)]
    if uri.is_glob:  # resolve the folder above the first glob character only
        head = uri.path[: min(uri.path.find(c) for c in GLOB_CHARS if c in uri.path)]
        real = _real(DataUri("file", head.rsplit("/", 1)[0] + "/"))
    else:
        real = _real(uri)
    if not under(real, resolved):
        raise _refuse(field, f"{uri.url} leads outside every allowed location ({SETTING})")


def storage_options(scheme: str, settings: Settings) -> dict[str, Any]:
    """The fsspec options of a filesystem for ``scheme``: the server's S3 endpoint, no secrets.

    Credentials are read from the environment of the process that opens the files.
    """
    if scheme == "s3":
        return {"endpoint_url": settings.s3_endpoint_url} if settings.s3_endpoint_url else {}
    return {}
