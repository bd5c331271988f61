"""A graded case: public ones named, hidden ones known only by the digest of their inputs,
which is the sha256 of their canonical JSON, whatever order or container they came in."""
import dataclasses
import hashlib
import json
import re

import numpy as np
import pytest

from grader.engine.cases import Case, digest_of, plain
from reference.shapes import PageInfo


def canonical_digest(data) -> str:
    """What the module's docstring promises, computed here from the JSON form directly."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_plain_gives_json_values_for_every_kind_a_case_holds():
    page = PageInfo(index=3, prompt_tokens=16, page_tokens=16, written_tokens=16, published=False)
    got = plain({1: (np.int32(5), np.float64(0.5), np.bool_(True)),
                 "array": np.arange(4, dtype=np.int64).reshape(2, 2),
                 "page": page, "nested": [("a", None)]})
    assert got == {"1": [5, 0.5, True], "array": [[0, 1], [2, 3]],
                   "page": {f.name: getattr(page, f.name) for f in dataclasses.fields(page)},
                   "nested": [["a", None]]}
    assert [type(v) for v in got["1"]] == [int, float, bool]      # numpy scalars made plain
    json.dumps(got)                                                 # and all of it JSON


def test_a_digest_is_the_sha256_of_the_canonical_json():
    value = {"b": [1, 2], "a": {"y": 0.25, "x": "s"}}
    assert digest_of(value) == canonical_digest(value)
    assert re.fullmatch(r"[0-9a-f]{16}", digest_of(value))
    assert digest_of({"a": {"x": "s", "y": 0.25}, "b": (1, 2)}) == digest_of(value)     # order, container
    assert digest_of(np.array([1, 2])) == digest_of([1, 2])
    assert digest_of({"b": [2, 1], "a": {"y": 0.25, "x": "s"}}) != digest_of(value)


class _Scenario:
    """Inputs that name themselves by what determines their run (as course scenarios do)."""
    def __init__(self, identity):
        self._identity = identity
        self.asked = 0

    def identity(self):
        self.asked += 1
        return self._identity


def test_a_case_digest_is_its_identity_when_it_has_one_and_is_kept():
    scenario = _Scenario({"workload": "w", "seed": 3})
    case = Case("scenario", "scenario#0", "hidden", scenario, "a loaded pool")
    assert case.digest == canonical_digest({"seed": 3, "workload": "w"})
    assert case.digest == case.digest and scenario.asked == 1       # computed once
    assert Case("shapes", "s", "public", (1, 2)).digest == canonical_digest([1, 2])
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.inputs = None


def test_public_cases_are_named_and_hidden_ones_only_by_digest():
    public = Case("shapes", "tiny model", "public", (1, 2), "a tiny model")
    hidden = Case("shapes", "shapes#4", "hidden", (3, 4), "a large model")
    assert public.cite == "tiny model"
    assert public.where == "tiny model"
    assert public.summary() == {"family": "shapes", "name": "tiny model", "visibility": "public"}
    assert hidden.cite == f"hidden:{hidden.digest}"
    assert hidden.where == f"a large model ({hidden.digest})"
    assert hidden.summary() == {"family": "shapes", "digest": hidden.digest, "visibility": "hidden"}
    for shown in (hidden.cite, hidden.where, json.dumps(hidden.summary())):
        assert "shapes#4" not in shown and "[3, 4]" not in shown


@pytest.mark.parametrize("visibility", ["Public", "secret", "", "zz"])
def test_a_case_is_public_or_hidden_and_nothing_else(visibility):
    with pytest.raises(ValueError, match="visibility must be public or hidden"):
        Case("shapes", "s", visibility, ())
