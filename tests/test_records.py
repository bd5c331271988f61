"""A run's evidence held compactly: records built on read, steps spilled into columns.

The expected values come from the run's own definitions (docs/worker.md): a decoding
request emits one token per step, at the step's end (its launch plus its duration), so
every token after the first is one of the step log's end times; the series is sampled at
every step launch.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from worker_helpers import machine, request, run  # noqa: E402

from grader.engine.oracle import reference_policy  # noqa: E402

from grader.engine import codec  # noqa: E402
from reference.records import SERIES, VIOLATION_KINDS, Labels, Records, Run, Series, StepLog, Violation  # noqa: E402
from reference.shapes import Admission  # noqa: E402
from reference.worker.recorder import StepColumns  # noqa: E402
from reference.shapes import RequestRecord  # noqa: E402


def _workload(n: int = 40, prompt: int = 200, output: int = 30):
    return [request(i, 0.01 * i, prompt, output) for i in range(n)]


@pytest.fixture(scope="module")
def small_run():
    model, worker = machine(4096)
    return run(model, worker, None, _workload())


def test_records_read_like_a_tuple_of_request_records(small_run):
    recs = small_run.requests
    assert isinstance(recs, Records) and len(recs) == 40
    as_tuple = tuple(recs)
    assert all(type(r) is RequestRecord for r in as_tuple)
    assert [r.id for r in as_tuple] == [f"r{i}" for i in range(40)]
    assert recs[0] == as_tuple[0] and recs[-1] == as_tuple[-1]
    assert recs[3:7] == as_tuple[3:7] and type(recs[3:7]) is tuple
    assert recs == as_tuple and as_tuple == recs and list(recs) == list(as_tuple)
    assert recs != as_tuple[:-1]
    assert recs.index(as_tuple[5]) == 5 and as_tuple[5] in recs
    with pytest.raises(IndexError):
        recs[40]
    with pytest.raises(TypeError):
        hash(recs)


def test_token_times_are_the_ends_of_the_steps_the_request_decoded_in(small_run):
    steps = small_run.steps
    ends = steps.launch_s + steps.duration_s
    end_set = set(ends.tolist())
    for r in small_run.requests:
        assert r.outcome == "completed"
        assert r.tokens_out == len(r.token_times) == 30
        assert r.token_times[0] == r.first_token_s and r.token_times[-1] == r.finish_s
        assert all(a < b for a, b in zip(r.token_times, r.token_times[1:]))
        assert all(t in end_set for t in r.token_times[1:])
    # Every decode token is somebody's: the step log's decoders add up to the tokens after
    # each request's first (which its last prefill chunk emits).
    assert int(steps.batch.sum()) == sum(r.tokens_out - 1 for r in small_run.requests)


@pytest.fixture(scope="module")
def mixed_run():
    """Completed, cancelled and preempted requests: token times of one step range, of
    several (a recompute), and single times (a first token from a prefill chunk)."""
    from worker_helpers import policy_variants, scenario
    model, worker, requests = scenario("page-tokens-1")
    result = run(model, worker, policy_variants()["greedy"], requests)
    outcomes = {r.outcome for r in result.requests}
    assert outcomes == {"completed", "cancelled_by_client", "rejected"}
    assert any(r.preemptions for r in result.requests if r.outcome == "completed")
    return result


@pytest.mark.parametrize("outcome", ["completed", "cancelled_by_client", "rejected", "failed"])
def test_token_times_of_an_outcome_are_its_records_times_in_one_array(mixed_run, outcome):
    from reference.records import column, token_times_of
    chosen = [r.token_times for r in mixed_run.requests if r.outcome == outcome]
    for requests in (mixed_run.requests, tuple(mixed_run.requests)):      # Records, and a tuple
        times, counts = token_times_of(requests, outcome)
        assert times.dtype == np.float64 and counts.tolist() == [len(t) for t in chosen]
        assert times.tolist() == [t for ts in chosen for t in ts]
        for f in dataclasses.fields(RequestRecord):
            if f.name == "token_times":
                with pytest.raises(KeyError):
                    column(requests, f.name)
            else:
                assert column(requests, f.name) == tuple(getattr(r, f.name) for r in mixed_run.requests)


@pytest.mark.parametrize("counts", [[], [0], [1], [3], [2, 0, 3], [0, 0, 2, 1], [1, 1, 1], [4, 0, 0]])
def test_within_request_marks_the_neighbours_of_one_request(counts):
    from reference.records import within_request
    owner = [k for k, n in enumerate(counts) for _ in range(n)]        # each time's request
    want = [a == b for a, b in zip(owner, owner[1:])]
    assert within_request(np.array(counts, dtype=np.intp)).tolist() == want


def test_columns_are_column_of_each_name(mixed_run):
    from reference.records import column, columns
    names = ("id", "outcome", "first_token_s")
    assert columns(mixed_run.requests, *names) == tuple(column(mixed_run.requests, n) for n in names)
    with pytest.raises(KeyError):
        columns(mixed_run.requests, "id", "token_times")


def test_token_gaps_and_ttfts_read_the_records(mixed_run):
    # Worked out from each record alone: the differences of its neighbouring times.
    from grader.course.experiments.common import token_gaps, ttfts
    done = [r.token_times for r in mixed_run.requests if r.outcome == "completed"]
    mid = sorted(t for ts in done for t in ts)[len(done)]
    for start, end in ((-np.inf, np.inf), (mid, np.inf), (-np.inf, mid), (mid, mid)):
        expected = [b - a for ts in done for a, b in zip(ts, ts[1:]) if start <= b <= end]
        assert token_gaps(mixed_run, start, end).tolist() == expected
    some = {r.id for r in mixed_run.requests[::3]}
    for ids in (None, some):
        assert ttfts(mixed_run, ids).tolist() == [
            r.first_token_s - r.arrival_s for r in mixed_run.requests
            if r.first_token_s is not None and (ids is None or r.id in ids)]


def test_the_codec_stores_records_as_their_tuple(small_run):
    back = codec.loads(codec.dumps(small_run))
    assert type(back.requests) is tuple and back.requests == small_run.requests
    assert back.digest() == small_run.digest()


def test_steps_spilled_into_columns_match_steps_kept_as_rows(monkeypatch):
    model, worker = machine(64, max_running=8)
    requests = _workload(60, prompt=300, output=50)
    import reference.worker.steps as steps_module
    monkeypatch.setattr(steps_module, "SPILL_ROWS", 10 ** 9)    # one spill, at the end
    whole = run(model, worker, None, requests)
    monkeypatch.setattr(steps_module, "SPILL_ROWS", 7)          # a spill every 7 steps
    spilled = run(model, worker, None, requests)
    assert len(whole.steps) > 7 * 20
    assert spilled.digest() == whole.digest()
    for run_ in (whole, spilled):
        steps, series = run_.steps, run_.series
        assert len(series["time_s"]) == len(steps) == len(series["free"])
        assert np.array_equal(series["time_s"], steps.launch_s)
        # Counts this small fit int32, the narrowest column the worker keeps.
        assert steps.batch.dtype == np.int32 and steps.launch_s.dtype == np.float64
        assert series["reserved"].dtype == np.int32
        # No prefix cache hits and no preemption on this pool: every prompt token is
        # prefilled once, in chunks.
        assert int(steps.chunk_tokens.sum()) == sum(r.prompt_tokens for r in run_.requests)
        assert sum(1 for c in steps.chunk_request if c) == int((steps.chunk_tokens > 0).sum())


def test_an_integer_column_widens_to_int64_when_a_value_needs_it():
    cols = StepColumns()
    rows = [(0.5 * i, 0.25, i, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) for i in range(5)]
    big = 2 ** 31   # one past int32: an extend() that fails part way must not keep a value twice
    rows[3] = rows[3][:9] + (big,) + rows[3][10:]
    cols.spill(rows)
    cols.spill([(9.0, 0.25, 7, 0, 0, 0, 0, 0, 0, -big - 5, 0, 0, 0)])
    out = cols.columns(("", "r0"))
    assert out[9].dtype == np.int64 and out[9].tolist() == [0, 0, 0, big, 0, -big - 5]
    assert out[2].dtype == np.int32 and out[2].tolist() == [0, 1, 2, 3, 4, 7]
    assert out[0].tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 9.0]


def test_a_column_widens_as_often_as_its_values_need():
    """The verdict column starts as int8 (recorder.py: _ROW). One spill whose values need
    int32 (300) and then int64 (2**40) widens it twice, int8 to int32 to int64, keeping each
    value once and exactly; the other columns keep their own width."""
    cols = StepColumns()
    row = (0.0, 0.25, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    cols.spill([row, row[:5] + (300,) + row[6:], row[:5] + (2 ** 40,) + row[6:], row])
    assert cols.cols[5].typecode == "q" and cols.cols[5].tolist() == [0, 300, 2 ** 40, 0]
    assert cols.cols[2].typecode == "i" and cols.cols[2].tolist() == [1] * 4


def test_promises_beyond_int32_are_recorded_exactly():
    model, worker = machine(64, max_running=2)
    huge = 3 * 2 ** 31   # an admission that promises more pages than int32 holds
    policy = reference_policy().with_(admit=lambda ask, ledger: Admission("admit", huge))
    result = run(model, worker, policy, _workload(4, prompt=20, output=3))
    reserved = result.series["reserved"]
    assert reserved.dtype == np.int64 and int(reserved.max()) >= huge
    assert result.counts()["over_commit"] > 0
    assert codec.loads(codec.dumps(result)).digest() == result.digest()


def test_string_columns_read_like_tuples_of_str(small_run, monkeypatch):
    steps = small_run.steps
    for labels in (steps.chunk_request, steps.chunk_verdict):
        assert isinstance(labels, Labels)
        as_tuple = tuple(labels)
        assert all(type(x) is str for x in as_tuple) and len(as_tuple) == len(steps)
        assert labels == as_tuple and as_tuple == labels and labels != as_tuple[:-1]
        assert labels[0] == as_tuple[0] and labels[-1] == as_tuple[-1]
        assert labels[2:9] == as_tuple[2:9] and type(labels[2:9]) is tuple
        with pytest.raises(IndexError):
            labels[len(as_tuple)]
        with pytest.raises(TypeError):
            hash(labels)
        monkeypatch.setattr(Labels, "_BLOCK", 7)        # iteration a few codes at a time
        assert tuple(labels) == as_tuple
        monkeypatch.undo()
    chunks = steps.chunk_tokens
    assert {steps.chunk_verdict[i] for i in range(len(steps)) if chunks[i]} == {"ok"}
    assert all((steps.chunk_request[i] == "") == (chunks[i] == 0) for i in range(len(steps)))
    assert set(steps.chunk_request) - {""} == {r.id for r in small_run.requests}
    back = codec.loads(codec.dumps(small_run))
    assert type(back.steps.chunk_request) is tuple and back.steps.chunk_request == steps.chunk_request


# ---- a run's evidence, its violation counts and the digest that proves two runs identical:
# any change to any part of a run must change the digest.

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
    assert set(result.by_id()) == {"r0", "r1"} and result.by_id()["r1"] == result.requests[1]   # records are built on read
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


def test_records_and_labels_equal_only_a_tuple_of_the_same_length_and_items(small_run):
    """Equality is the tuple's: a longer tuple with the same start differs, and so does one
    with any item changed, whether the new item sorts before or after the old."""
    recs = small_run.requests
    as_tuple = tuple(recs)
    assert recs != as_tuple + as_tuple[:1] and as_tuple + as_tuple[:1] != recs
    for labels in (small_run.steps.chunk_request, small_run.steps.chunk_verdict):
        names = tuple(labels)
        assert labels != names + names[:1] and names + names[:1] != labels
        i = next(k for k, name in enumerate(names) if name)
        for other in (names[i] + "~", names[i][:-1]):     # after it, then before it
            changed = names[:i] + (other,) + names[i + 1:]
            assert labels != changed and changed != labels
