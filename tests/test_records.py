"""reference.records: a run's evidence, its violation counts and the digest that proves two
runs identical: any change to any part of a run must change the digest."""
import dataclasses
import hashlib
import json

import numpy as np
import pytest

from reference.records import SERIES, VIOLATION_KINDS, Run, Series, StepLog, Violation
from worker_helpers import machine, request, run


@pytest.fixture(scope="module")
def result():
    model, worker = machine(40)
    return run(model, worker, None, (request(0, 0.0, 20, 3), request(1, 0.01, 40, 2)))


def test_counts_name_every_kind_and_count_each_violation():
    v = [Violation("leak", 1.0, ("r0",)), Violation("leak", 2.0, ("r1",)),
         Violation("use_after_free", 3.0, ("r0", "r1"), (4,), 2, "x")]
    empty = StepLog(*(np.zeros(0),) * 4, (), (), np.zeros(0))
    r = Run((), empty, Series({k: np.zeros(0) for k in SERIES}), tuple(v), 10, 0.0)
    counts = r.counts()
    assert list(counts) == list(VIOLATION_KINDS)
    assert counts["leak"] == 2 and counts["use_after_free"] == 1
    assert sum(counts.values()) == 3 and len(r.steps) == 0


def test_by_id_and_len(result):
    assert set(result.by_id()) == {"r0", "r1"} and result.by_id()["r1"] is result.requests[1]
    assert len(result.steps) == result.steps.launch_s.shape[0] > 0


def test_the_digest_is_sha256_of_the_canonical_json(result):
    text = json.dumps(result.canonical(), sort_keys=True, separators=(",", ":"))
    assert result.digest() == hashlib.sha256(text.encode()).hexdigest()
    canonical = result.canonical()
    assert set(canonical) == {"requests", "steps", "series", "violations", "total_pages",
                              "end_s", "aborted", "unfinished"}
    first = canonical["requests"][0]
    assert first[0] == "r0" and len(first) == len(dataclasses.fields(result.requests[0]))


def _changed(run_, part, **change):
    if part == "request":
        return dataclasses.replace(run_, requests=(dataclasses.replace(run_.requests[0], **change),)
                                   + run_.requests[1:])
    if part == "steps":
        (name, value), = change.items()
        column = getattr(run_.steps, name)
        if isinstance(column, np.ndarray):
            column = column.copy()
            column[-1] = value
        else:
            column = column[:-1] + (value,)
        return dataclasses.replace(run_, steps=dataclasses.replace(run_.steps, **{name: column}))
    if part == "series":
        (name, value), = change.items()
        columns = dict(run_.series.columns)
        columns[name] = columns[name].copy()
        columns[name][0] = value
        return dataclasses.replace(run_, series=Series(columns))
    if part == "violations":
        return dataclasses.replace(run_, violations=run_.violations + (Violation("leak", 0.0, ("r0",)),))
    return dataclasses.replace(run_, **change)


@pytest.mark.parametrize("part,change", [
    ("request", {"tokens_out": 99}), ("request", {"outcome": "failed"}),
    ("request", {"token_times": (1.0,)}), ("request", {"reason": "x"}),
    ("request", {"pages_held": 7}), ("request", {"released_s": 3.5}),
    ("steps", {"duration_s": 9.0}), ("steps", {"launch_s": 9.0}), ("steps", {"batch": 9}),
    ("steps", {"chunk_tokens": 9}), ("steps", {"chunk_request": "r9"}),
    ("steps", {"chunk_verdict": "starved"}), ("steps", {"pages_pinned": 99}),
    *[("series", {name: 99}) for name in SERIES],
    ("violations", {}), ("run", {"total_pages": 41}), ("run", {"end_s": 99.0}),
    ("run", {"aborted": "stopped"}), ("run", {"unfinished": ("r1",)}),
])
def test_any_change_to_a_run_changes_its_digest(result, part, change):
    assert _changed(result, part, **change).digest() != result.digest()


def test_a_run_and_its_parts_are_frozen(result):
    """Evidence is read by every grade: nothing may change it after the run."""
    for obj, name in [(result, "end_s"), (result.steps, "batch"), (result.series, "columns"),
                      (Violation("leak", 0.0, ("r0",)), "kind")]:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, name, None)


def test_a_run_with_non_finite_times_still_has_a_digest(result):
    endless = dataclasses.replace(result, end_s=float("inf"))
    assert endless.digest() != result.digest() != dataclasses.replace(result, end_s=float("nan")).digest()
