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
    with pytest.raises(TypeError, match=r"cannot store .*Thing \(not registered in grader.engine.codec\)"):
        codec.dumps(Thing())
    with pytest.raises(TypeError, match="only dicts with str keys can be stored"):
        codec.dumps({1: "int keys"})


@pytest.mark.parametrize("text,says", [
    ('{"__type__": 5}', "bad type tag"),
    ('{"__type__": "no-colon"}', "bad type tag"),
    ('{"__type__": "grader.no_such_module:X"}', "not a class this grader stores"),
    # A course class that is never stored, imported beside the registered ones.
    ('{"__type__": "reference.request:Request"}', "not a class this grader stores"),
    ('{"__type__": "reference.shapes:Slo", "ttft_s": 1, "gap_s": 1, "evil": 1}', "has no field 'evil'"),
    ('{"__type__": "reference.shapes:Slo", "zzz": 1, "ttft_s": 1, "evil": 1}', "has no field 'evil'"),   # the first
    ('{"__type__": "reference.shapes:Slo", "ttft_s": 1}', "Slo: "),            # a field missing
    ('{"__tuple__": [1], "x": 2}', "without a tag"),                          # an extra key
    ('{"__frozenset__": [1], "x": 2}', "without a tag"),
    ('{"__dict__": {}, "x": 2}', "without a tag"),
    ('{"__frozenset__": 5}', "a frozenset is stored as a list"),
    ('{"__dict__": [1]}', "a dict is stored as an object"),
    ('{"__ndarray__": "int64", "shape": [2], "data": [1, 2], "x": 1}', "bad numpy array"),
    ('{"__ndarray__": "int64", "shape": 2, "data": [1, 2]}', "bad numpy array"),
    ('{"__ndarray__": "int64", "shape": [2], "data": 12}', "bad numpy array"),
    ('{"__ndarray__": "int64", "shape": [3], "data": [1, 2]}', "bad numpy array: "),   # data and shape disagree
    ('{"__ndarray__": "int64", "shape": [1], "data": [{"a": 1}]}', "bad numpy array: "),
    ("[" * 600 + "]" * 600, "nested too deeply"),                  # JSON reads it, decode recurses
    ("[" * 5000 + "]" * 5000, "not JSON"),
    ("5.5e", "not JSON"),
])
def test_every_malformed_form_is_a_codec_error_naming_what_is_wrong(text, says):
    """A reader treats a CodecError as 'compute it again': any other exception would be a
    crash of the grader on a torn or edited cache file."""
    with pytest.raises(codec.CodecError) as e:
        codec.loads(text)
    assert says in str(e.value)


def test_a_tag_naming_a_solution_or_a_foreign_module_imports_nothing(monkeypatch):
    import sys
    for name in ("reference.solutions.lesson3", "grader.course.release_plot"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(codec.CodecError):
        codec.loads('{"__type__": "reference.solutions.lesson3:Plan"}')
    assert "reference.solutions.lesson3" not in sys.modules       # the answers stay unread
    with pytest.raises(codec.CodecError):
        codec.loads('{"__type__": "json.decoder:JSONDecoder"}')
    # A course module may be imported to find its class: that is how a kept value comes back.
    with pytest.raises(codec.CodecError):
        codec.loads('{"__type__": "grader.course.release_plot:NoSuchClass"}')
    assert "grader.course.release_plot" in sys.modules


def test_an_unregistered_dataclass_cannot_be_stored():
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Point:
        x: int
    with pytest.raises(TypeError, match="not registered"):
        codec.dumps(Point(1))
