"""What a worker run leaves behind: request records, the step log, time series, violations.

A run is evidence: every grade and every experiment reads it, so it is frozen, and its
digest (sha256 of a canonical JSON form) proves two runs identical byte for byte.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, is_dataclass

import numpy as np

from reference.shapes import RequestRecord

VIOLATION_KINDS = (
    "broken_promise",          # a running request needed a page and none was free beyond others' promises
    "over_commit",             # an admission made outstanding promises exceed free capacity
    "use_after_free",          # a page freed under an in-flight step was handed out before it completed
    "leak",                    # an ended request's page never released (finished, cancelled, stopped)
    "double_release",          # a request's pages released twice
    "release_of_referenced",   # that second release would drop a page another request references
    "cross_scope_hit",         # a prefix lookup returned a page published under another scope
    "wrong_prefix_hit",        # a prefix lookup returned a page of other tokens or another position
    "poisoned_publish",        # a page published before its write completed, or not a full prompt page
    "scheduled_after_cancel",  # a cancelled request kept being scheduled
    "invalid_decision",        # a policy returned a value the worker could not use
)


def _plain(value):
    return asdict(value) if is_dataclass(value) else value


@dataclass(frozen=True)
class Violation:
    kind: str
    time_s: float
    requests: tuple[str, ...]
    pages: tuple[int, ...] = ()
    step: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class StepLog:
    """One row per step, as columns."""
    launch_s: np.ndarray      # float64
    duration_s: np.ndarray    # float64
    batch: np.ndarray         # int: decoding requests in the step
    chunk_tokens: np.ndarray  # int: prefill chunk tokens (0 when none)
    chunk_request: Sequence[str]   # "" when no chunk (a tuple, or Labels: the worker's)
    chunk_verdict: Sequence[str]   # the chunk rule's verdict ("" when no chunk)
    pages_pinned: np.ndarray  # int: pages held by the step's requests at launch
    # The worker's integer columns (and the series') are int32 unless a value needs int64:
    # read values with int(), and widen (astype(np.int64)) before arithmetic that could
    # leave int32.

    def __len__(self) -> int:
        return int(self.launch_s.shape[0])


SERIES = ("time_s", "free", "evictable", "reserved", "running", "waiting", "prefix_hits")


@dataclass(frozen=True)
class Series:
    """Worker state sampled at every step launch (prefix_hits is cumulative)."""
    columns: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]


class Labels(Sequence):
    """A string column of the step log, held as codes into a table of names: it reads like
    the tuple of str it stands for (length, indexing, slices as tuples, iteration, equality
    with a tuple of the same strings), at 1 or 4 bytes a step instead of a tuple's 8."""
    __slots__ = ("_codes", "_names")

    _BLOCK = 65536   # iteration converts codes to ints a block at a time, not all at once

    def __init__(self, codes: np.ndarray, names: tuple[str, ...]):
        self._codes, self._names = codes, names

    def __len__(self) -> int:
        return int(self._codes.shape[0])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(map(self._names.__getitem__, self._codes[index].tolist()))
        return self._names[self._codes[index]]

    def __iter__(self):
        names, codes = self._names, self._codes
        for start in range(0, len(codes), self._BLOCK):
            yield from map(names.__getitem__, codes[start:start + self._BLOCK].tolist())

    def __eq__(self, other) -> bool:
        if not isinstance(other, (Labels, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None   # like the tuple it stands for, but not hashable

    def __repr__(self) -> str:
        return f"Labels({len(self)} steps)"


class Records(Sequence):
    """A run's request records, in workload order, held compactly.

    A record's token times are a few step ranges of the step end times (decoding is
    contiguous), so they are kept as ranges over one shared array and each RequestRecord,
    with its tuple of times, is built when it is read: at 100k requests of 256 tokens the
    tuples would take about 800 MB. It reads like a tuple of records and compares equal to
    one with the same records.
    """
    __slots__ = ("_rows", "_launch", "_duration")

    def __init__(self, rows: tuple, launch_s: np.ndarray, duration_s: np.ndarray):
        # rows: (RequestRecord's fields with token_times None, segments), where a segment
        # is one token's time or a (first, end) range of steps whose ends are its times. A
        # step's end is its launch + its duration, the same float addition the worker made,
        # so no column of ends is kept.
        self._rows, self._launch, self._duration = rows, launch_s, duration_s

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return tuple(self._record(row) for row in self._rows[index])
        return self._record(self._rows[index])

    def __iter__(self):
        return map(self._record, self._rows)

    def __eq__(self, other) -> bool:
        if not isinstance(other, (Records, tuple)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None   # like the tuple of records it stands for, but built per read: no hash

    def __repr__(self) -> str:
        return f"Records({len(self)} requests)"

    def column(self, name: str) -> tuple:
        """One field of every record, in order, without building the records (not
        token_times: see token_times_of)."""
        at = _FIELD_AT[name]
        return tuple(row[0][at] for row in self._rows)

    def token_times_of(self, outcome: str) -> tuple[np.ndarray, np.ndarray]:
        """The token times of the records with this outcome, in order, as one array, and
        how many each of them has: the same floats their token_times hold."""
        at, parts, counts = _FIELD_AT["outcome"], [], []
        launch, duration = self._launch, self._duration
        for fields_, segments in self._rows:
            if fields_[at] != outcome:
                continue
            n = 0
            for seg in segments:
                if isinstance(seg, tuple):
                    first, end = seg
                    parts.append(launch[first:end] + duration[first:end])
                    n += end - first
                else:
                    parts.append((seg,))
                    n += 1
            counts.append(n)
        return _times(parts), np.array(counts, dtype=np.intp)

    def _record(self, row) -> RequestRecord:
        fields_, segments = row
        times: list[float] = []
        launch, duration = self._launch, self._duration
        for seg in segments:
            if isinstance(seg, tuple):
                first, end = seg
                times.extend((launch[first:end] + duration[first:end]).tolist())
            else:
                times.append(seg)
        return RequestRecord(*fields_[:9], tuple(times), *fields_[10:])


_FIELD_AT = {f.name: i for i, f in enumerate(fields(RequestRecord)) if f.name != "token_times"}


def _times(parts) -> np.ndarray:
    return np.concatenate(parts).astype(np.float64, copy=False) if parts else np.zeros(0)


def column(requests: Sequence[RequestRecord], name: str) -> tuple:
    """``tuple(getattr(r, name) for r in requests)``; from Records, without building them.
    Not token_times (token_times_of reads them as arrays): KeyError, as for no field."""
    if name not in _FIELD_AT:
        raise KeyError(f"{name!r} is not a column of request records")
    if isinstance(requests, Records):
        return requests.column(name)
    return tuple(getattr(r, name) for r in requests)


def columns(requests: Sequence[RequestRecord], *names: str) -> tuple[tuple, ...]:
    """``column`` of each name, in order."""
    return tuple(column(requests, name) for name in names)


def within_request(counts: np.ndarray) -> np.ndarray:
    """For the times token_times_of gives with these counts: True at i when times[i] and
    times[i + 1] belong to one request (their difference is a gap between its tokens),
    False across the boundary of two requests."""
    same = np.ones(max(int(counts.sum()) - 1, 0), dtype=bool)
    ends = np.cumsum(counts[counts > 0])[:-1]     # where each request but the last ends
    same[ends - 1] = False
    return same


def token_times_of(requests: Sequence[RequestRecord], outcome: str) -> tuple[np.ndarray, np.ndarray]:
    """The token times of the records with this outcome, in order, as one array, and how
    many each of them has (Records.token_times_of; a tuple of records reads the same)."""
    if isinstance(requests, Records):
        return requests.token_times_of(outcome)
    chosen = [r.token_times for r in requests if r.outcome == outcome]
    return (_times([t for t in chosen if t]),
            np.array([len(t) for t in chosen], dtype=np.intp))


@dataclass(frozen=True)
class Run:
    requests: Sequence[RequestRecord]     # a tuple, or Records (the worker's, compact)
    steps: StepLog
    series: Series
    violations: tuple[Violation, ...]
    total_pages: int
    end_s: float
    aborted: str = ""     # why the run stopped early (stuck, or at the step cap), else ""
    unfinished: tuple[str, ...] = ()   # ids still queued or running when it stopped early (failed)

    def counts(self) -> dict[str, int]:
        c = Counter(v.kind for v in self.violations)
        return {k: c.get(k, 0) for k in VIOLATION_KINDS}

    def by_id(self) -> dict[str, RequestRecord]:
        return {r.id: r for r in self.requests}

    def canonical(self) -> dict:
        names = [f.name for f in fields(RequestRecord)]
        return {
            "requests": [[_plain(getattr(r, n)) for n in names] for r in self.requests],
            "steps": {k: (v.tolist() if isinstance(v, np.ndarray) else list(v))
                      for k, v in self.steps.__dict__.items()},
            "series": {k: v.tolist() for k, v in self.series.columns.items()},
            "violations": [asdict(v) for v in self.violations],
            "total_pages": self.total_pages, "end_s": self.end_s, "aborted": self.aborted,
            "unfinished": list(self.unfinished),
        }

    def digest(self) -> str:
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"), allow_nan=True)
        return hashlib.sha256(text.encode()).hexdigest()
