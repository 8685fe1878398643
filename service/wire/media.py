"""Media types of request bodies and answers: what ``Content-Type`` says, what ``Accept`` prefers."""

from __future__ import annotations

import re

from service.errors import UnsupportedMediaType, detail

JSON_MEDIA_TYPE = "application/json"
CSV_MEDIA_TYPE = "text/csv"
BINARY_MEDIA_TYPE = "application/octet-stream"
_PLAIN_MEDIA_TYPE = re.compile(r"^[a-z0-9][a-z0-9.+-]{0,62}/[a-z0-9][a-z0-9.+-]{0,62}$")


def media_type(content_type: str | None) -> str:
    """The lower-case ``type/subtype`` of a ``Content-Type`` header ('' when absent)."""
    return (content_type or "").split(";")[0].strip().lower()


def is_json(content_type: str | None) -> bool:
    """True for ``application/json`` and ``application/*+json`` (any parameters)."""
    return is_json_media(media_type(content_type))


def is_json_media(kind: str) -> bool:
    """``is_json`` of a media type already read by ``media_type``."""
    return kind == JSON_MEDIA_TYPE or (kind.startswith("application/") and kind.endswith("+json"))


def is_csv(content_type: str | None) -> bool:
    """True for ``text/csv`` (with or without parameters such as charset)."""
    return media_type(content_type) == CSV_MEDIA_TYPE


def unsupported(content_type: str | None, accepted: tuple[str, ...]) -> UnsupportedMediaType:
    """The 415 error: what was sent (when it is a plain media type), what is accepted, the fix."""
    kind = media_type(content_type)
    if not kind:
        sent = "the request has no Content-Type header"
    elif _PLAIN_MEDIA_TYPE.match(kind):
        sent = f"Content-Type {kind} is not accepted"
    else:
        sent = "this Content-Type is not accepted"
    fix = f"add -H 'Content-Type: {JSON_MEDIA_TYPE}' for a JSON body"
    if CSV_MEDIA_TYPE in accepted:
        fix += f", or -H 'Content-Type: {CSV_MEDIA_TYPE}' with --data-binary @file.csv for CSV"
    if kind == "application/x-www-form-urlencoded":
        fix += " (curl -d sends application/x-www-form-urlencoded unless told otherwise)"
    return UnsupportedMediaType(
        f"{sent}; send {' or '.join(accepted)}",
        [detail("Content-Type", f"must be {' or '.join(accepted)}: {fix}")],
    )


PLAIN_ACCEPTS = frozenset({"*/*", "application/json"})
"""The commonest ``Accept`` values, which do not ask for CSV (answered without parsing)."""


def wants_csv(accept: str | None) -> bool:
    """True when ``Accept`` prefers ``text/csv`` to JSON (highest q wins; ties: first listed)."""
    if accept is None or accept in PLAIN_ACCEPTS:
        return False
    best, best_q = None, 0.0
    for part in (accept or "").split(","):
        media, *params = (p.strip() for p in part.split(";"))
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        media = media.lower()
        known = media in (CSV_MEDIA_TYPE, "application/json", "*/*", "text/*", "application/*")
        if known and q > best_q:
            best, best_q = media, q
    return best in (CSV_MEDIA_TYPE, "text/*")
