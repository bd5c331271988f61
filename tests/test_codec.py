"""The stored format: every value the grader keeps comes back equal, and nothing else comes back."""
from __future__ import annotations

import math

import numpy as np
import pytest

from grader.engine import codec
from grader.engine.cases import Case
from reference.shapes import Admission, RequestRecord, Slo


def test_values_round_trip_with_their_types():
    rec = RequestRecord("r1", "s", "c", Slo(1.0, 0.25), 0.5, "completed", 10, 4, 2, (1.0, 1.5))
    value = {"a": (1, 2.5, "x", None, True), "b": [Admission("admit", 3)], "r": rec,
             "case": Case("probe", "p", "public", (rec, None)), "inf": math.inf,
             "arr": np.arange(6, dtype=np.int64).reshape(2, 3), "f": np.array([0.5, -1.0])}
    back = codec.loads(codec.dumps(value))
    assert back["a"] == value["a"] and type(back["a"]) is tuple
    assert back["b"] == value["b"] and type(back["b"]) is list
    assert back["r"] == rec and back["case"] == value["case"] and back["inf"] == math.inf
    assert back["arr"].dtype == np.int64 and back["arr"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["f"].dtype == np.float64


@pytest.mark.parametrize("text", [
    '{"__type__": "os:system", "command": "true"}',                 # not a registered class
    '{"__type__": "reference.solutions.lesson1:Thing"}',            # never imported to look
    '{"__type__": "reference.shapes:Slo", "ttft_s": 1, "gap_s": 1, "evil": 1}',   # unknown field
    '{"__ndarray__": "object", "shape": [1], "data": [1]}',         # dtype outside the list
    '{"no": "tag"}', "not json", '{"__tuple__": 5}',
])
def test_foreign_or_tampered_text_is_refused(text):
    with pytest.raises(codec.CodecError):
        codec.loads(text)


def test_an_unregistered_value_cannot_be_stored():
    class Thing:
        pass
    with pytest.raises(TypeError):
        codec.dumps(Thing())
    with pytest.raises(TypeError):
        codec.dumps({1: "int keys"})
