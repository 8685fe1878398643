"""A training's CSV body read by the fast path (``numeric_table``) gives what the general path
(``csv.reader``, ``float`` per cell) gives: the same payload, or the same error."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.datastructures import QueryParams

from service.errors import ApiError
from service.wire import csv_bodies
from service.wire.csv_bodies import train_payload

QUERY = QueryParams({"model_type": "lda", "target": "y", "name": "m"})
BODIES = {
    "numeric labels": "a,b,y\n0,1,0\n1,0,1\n2,2,0\n3,1,1\n",
    "labels in the middle": "a,y,b\n0,0,1\n1,1,0.5\n2,0,2e1\n3,1,-1\n",
    "string labels": "a,b,y\n0,1,cat\n1,0, dog \n2,2,cat\n3,1,dog\n",
    "whole-number labels": "a,b,y\n0,1,1.0\n1,0,2\n2,2,1.00\n3,1,2\n",
    "crlf, bom, blank lines": "\ufeffa, b ,y\r\n0,1,0\r\n\r\n1,0,1\r\n2,2,0\r\n3,1,1\r\n\r\n",
    "spaces around cells": "a,b,y\n 0 ,1,0\n1, 0 ,1\n2,2,0\n3,1,1\n",
    "nan": "a,b,y\n0,nan,0\n1,0,1\n2,2,0\n3,1,1\n",
    "a word among the numbers": "a,b,y\n0,x,0\n1,0,1\n2,2,0\n3,1,1\n",
    "an empty label": "a,b,y\n0,1,\n1,0,1\n2,2,0\n3,1,1\n",
    "ragged": "a,b,y\n0,1,0\n1,0\n2,2,0\n",
    "no target": "a,b,c\n0,1,0\n1,0,1\n",
    "target twice": "a,y,y\n0,1,0\n1,0,1\n",
    "duplicate feature": "a,a,y\n0,1,0\n1,0,1\n",
    "quoted": 'a,b,y\n"0",1,0\n1,0,1\n2,2,0\n3,1,1\n',
    "no rows": "a,b,y\n",
}


def outcome(raw: bytes) -> tuple[str, object]:
    try:
        payload = train_payload(raw, QUERY)
    except ApiError as exc:
        return "error", (exc.status_code, exc.code, [d.model_dump() for d in exc.details])
    return "payload", {**payload, "X": np.asarray(payload["X"], dtype=float).tolist()}


@pytest.mark.parametrize("name", list(BODIES))
def test_the_fast_path_answers_as_the_general_one(name, monkeypatch):
    raw = BODIES[name].encode()
    fast = outcome(raw)
    monkeypatch.setattr(csv_bodies, "numeric_table", lambda raw, target: None)
    general = outcome(raw)
    assert repr(fast) == repr(general)  # repr: NaN equals NaN


def test_a_plain_numeric_body_takes_the_fast_path():
    found = csv_bodies.numeric_table(BODIES["labels in the middle"].encode(), "y")
    assert found is not None
    names, X, labels = found
    assert names == ["a", "b"] and labels == ["0", "1", "0", "1"]
    assert isinstance(X, np.ndarray) and X.tolist() == [[0, 1], [1, 0.5], [2, 20], [3, -1]]
    assert csv_bodies.numeric_table(BODIES["string labels"].encode(), "y") is not None
    assert csv_bodies.numeric_table(BODIES["quoted"].encode(), "y") is None
