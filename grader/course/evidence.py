"""Lesson 6's evidence: what a regressed release's run shows, as tables and cited items.

The worker's run becomes four tables, the files of an incident bundle: the request log
(what each client got), the step log, the time series and the worker's audit log (its
violations). An *evidence item* is one selection from them (the requests that were
preempted, the steps longer than the gap budget, the samples where promises exceeded
capacity, ...) under a stable id, E1..En, that a diagnosis cites.

Each item also says which mechanisms of the lesson's taxonomy it *supports* in this
incident: the ones whose signature its rows show. Support is decided on the data, not
on which faults were injected: the audit rows of use-after-free support reclaiming
before the fence only when there are such rows, and steps over the budget support the
dropped attention term only when some step with an ``ok`` chunk verdict ran over it.
A few items support nothing (decode-only steps, late first tokens): reading them is
part of the work, citing them for a mechanism is not evidence.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from grader.engine.codec import persistent
from grader.course.replay import client_reports
from grader.course.sheet import get_path
from reference.records import Run

AUDIT_ROWS = 200          # rows per violation kind in audit.csv (the count is always the full one)
LISTED = 12               # row keys an index entry lists
EPS = 1e-9

# What each violation kind the audit log shows is a sign of.
AUDIT = {
    "over_commit": {"inactive_hits_as_free", "outstanding_ignored"},
    "broken_promise": {"inactive_hits_as_free", "outstanding_ignored", "output_not_reserved"},
    "use_after_free": {"reclaim_before_fence"},
    "leak": {"reclaim_never"},
    "cross_scope_hit": {"key_without_scope"},
}


# ---- the tables -------------------------------------------------------------------------------
def _t(x) -> float | str:
    return "" if x is None else round(float(x), 6)


def _gaps(times) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def request_rows(run: Run) -> list[dict]:
    """requests.csv: one row per request, what the client got and what the worker did."""
    reports = client_reports(run)
    rows = []
    for r in run.requests:
        gaps = _gaps(r.token_times)
        corrupted = r.id in reports and r.outcome == "completed"
        rows.append({
            "id": r.id, "tenant": r.scope, "class": r.cls, "arrival_s": _t(r.arrival_s),
            "outcome": "failed" if corrupted else r.outcome,
            "reason": f"client reported: {reports[r.id]}" if corrupted else r.reason,
            "client_report": reports.get(r.id, "") if corrupted else "",
            "prompt_tokens": r.prompt_tokens, "max_new_tokens": r.max_new_tokens, "tokens_out": r.tokens_out,
            "admitted_s": _t(r.admitted_s), "first_token_s": _t(r.first_token_s),
            "ttft_s": _t(r.first_token_s - r.arrival_s) if r.first_token_s is not None else "",
            "largest_gap_s": _t(max(gaps)) if gaps else "",
            "mean_gap_s": _t(sum(gaps) / len(gaps)) if gaps else "",
            "finish_s": _t(r.finish_s), "cancel_s": _t(r.cancel_s), "fence_s": _t(r.fence_s),
            "released_s": _t(r.released_s), "preemptions": r.preemptions, "pages_held": r.pages_held,
            "slo_ttft_s": r.slo.ttft_s, "slo_gap_s": r.slo.gap_s,
        })
    return rows


def step_rows(run: Run) -> list[dict]:
    """steps.csv: one row per step. chunk_offset is how many prompt tokens of the chunk's
    request earlier chunks had prefilled (prefix-cache hits are not chunks)."""
    s = run.steps
    done: dict[str, int] = {}
    rows = []
    for i in range(len(s)):
        req, chunk = s.chunk_request[i], int(s.chunk_tokens[i])
        offset = done.get(req, 0) if req else ""
        if req:
            done[req] = done.get(req, 0) + chunk
        rows.append({"step": i, "launch_s": _t(s.launch_s[i]), "duration_s": _t(s.duration_s[i]),
                     "decoding": int(s.batch[i]), "chunk_tokens": chunk, "chunk_request": req,
                     "chunk_offset": offset, "chunk_verdict": s.chunk_verdict[i],
                     "pages_pinned": int(s.pages_pinned[i])})
    return rows


def series_rows(run: Run) -> list[dict]:
    """series.csv: the worker's state at every step launch; capacity = free + evictable,
    headroom = capacity - reserved (the pages no promise covers)."""
    c = run.series.columns
    rows = []
    for i in range(len(c["time_s"])):
        free, evictable, reserved = int(c["free"][i]), int(c["evictable"][i]), int(c["reserved"][i])
        rows.append({"time_s": _t(c["time_s"][i]), "free": free, "evictable": evictable,
                     "capacity": free + evictable, "reserved": reserved,
                     "headroom": free + evictable - reserved, "running": int(c["running"][i]),
                     "waiting": int(c["waiting"][i]), "prefix_hits": int(c["prefix_hits"][i])})
    return rows


def audit_rows(run: Run) -> list[dict]:
    """audit.csv: the worker's own log of broken invariants, at most AUDIT_ROWS per kind."""
    rows, per = [], {}
    for v in run.violations:
        per[v.kind] = per.get(v.kind, 0) + 1
        if per[v.kind] <= AUDIT_ROWS:
            rows.append({"time_s": _t(v.time_s), "kind": v.kind, "requests": " ".join(v.requests),
                         "pages": " ".join(map(str, v.pages[:16])), "step": "" if v.step is None else v.step,
                         "detail": v.detail})
    return rows


@persistent
@dataclass(frozen=True)
class Tables:
    requests: list
    steps: list
    series: list
    audit: list

    @classmethod
    def of(cls, run: Run) -> "Tables":
        return cls(request_rows(run), step_rows(run), series_rows(run), audit_rows(run))


# ---- the items -----------------------------------------------------------------------------------
@persistent
@dataclass(frozen=True)
class Item:
    key: str                       # what kind of observation: "audit:over_commit", "steps:long", ...
    file: str                      # the bundle file it selects from
    select: str                    # the selection, in words
    rows: tuple[str, ...]          # keys of the selected rows (request ids, step numbers, times)
    count: int                     # how many rows the selection holds
    supports: frozenset = frozenset()   # mechanisms whose signature it shows in this incident
    id: str = ""                   # E1.., once the index is drawn

    def entry(self) -> dict:
        """Its line in the bundle's evidence index."""
        return {"id": self.id, "file": self.file, "select": self.select, "count": self.count,
                "first": list(self.rows[:LISTED])}


def _item(key, file, select, rows, supports=(), count=None) -> Item:
    rows = tuple(str(r) for r in rows)
    return Item(key, file, select, rows, len(rows) if count is None else count,
                frozenset(supports) if rows else frozenset())


def observe(release: Mapping, run: Run, before: Run, t: Tables) -> list[Item]:
    """Every evidence item of a regressed run (``before``: the previous release, same seed)."""
    budget = float(get_path(release, "chunk_rule.gap_budget_s", 0.1))
    gap = min(r.slo.gap_s for r in run.requests)
    counts = run.counts()
    items = []
    for kind, mechanisms in AUDIT.items():
        rows = [f"{a['time_s']}" for a in t.audit if a["kind"] == kind]
        items.append(replace(_item(f"audit:{kind}", "evidence/audit.csv", f"rows of kind {kind}", rows,
                                   mechanisms), count=counts[kind]))
    req = t.requests
    items.append(_item("requests:preempted", "evidence/requests.csv", "requests with preemptions > 0",
                       [r["id"] for r in req if r["preemptions"]],
                       {"inactive_hits_as_free", "outstanding_ignored", "output_not_reserved"}))
    items.append(_item("requests:garbled", "evidence/requests.csv", "requests whose client_report is garbled",
                       [r["id"] for r in req if r["client_report"] == "garbled"],
                       {"reclaim_before_fence", "key_without_parent"}))
    items.append(_item("requests:other_tenant", "evidence/requests.csv",
                       "requests whose client_report is other_tenant_text",
                       [r["id"] for r in req if r["client_report"] == "other_tenant_text"], {"key_without_scope"}))
    cancelled = [r for r in req if r["outcome"] == "cancelled_by_client"]
    early = any(r["released_s"] != "" and r["fence_s"] != "" and r["released_s"] < r["fence_s"] - EPS
                for r in cancelled)
    kept = any(r["released_s"] == "" and r["pages_held"] > 0 for r in cancelled)
    items.append(_item("requests:cancelled", "evidence/requests.csv",
                       "cancelled requests (columns cancel_s, fence_s, released_s)",
                       [r["id"] for r in cancelled],
                       ({"reclaim_before_fence"} if early else set()) | ({"reclaim_never"} if kept else set())))
    items.append(_item("requests:never_admitted", "evidence/requests.csv",
                       "requests that failed without ever being admitted",
                       [r["id"] for r in req if r["outcome"] == "failed" and r["admitted_s"] == ""],
                       {"reclaim_never", "impossible_request_waits"}))
    items.append(_item("requests:slow_tokens", "evidence/requests.csv",
                       "requests whose largest_gap_s exceeds their slo_gap_s",
                       [r["id"] for r in req if r["largest_gap_s"] != "" and r["largest_gap_s"] > r["slo_gap_s"]],
                       {"attention_term_dropped", "stall_hidden_by_average"}))
    items.append(_item("requests:late_first_token", "evidence/requests.csv",
                       "requests whose ttft_s exceeds their slo_ttft_s",
                       [r["id"] for r in req if r["ttft_s"] != "" and r["ttft_s"] > r["slo_ttft_s"]]))
    steps = t.steps
    over = [s for s in steps if s["chunk_tokens"] and s["chunk_verdict"] == "ok" and s["duration_s"] > budget + EPS]
    items.append(_item("steps:over_budget", "evidence/steps.csv",
                       f"steps with an ok chunk that took longer than the release's gap_budget_s ({budget:g} s)",
                       [s["step"] for s in over], {"attention_term_dropped"}))
    long = [s for s in steps if s["duration_s"] > gap + EPS]
    within = any(s["duration_s"] <= budget + EPS for s in long)
    items.append(_item("steps:long", "evidence/steps.csv",
                       f"steps longer than the smallest class gap_s ({gap:g} s)", [s["step"] for s in long],
                       ({"stall_hidden_by_average"} if within else set())
                       | ({"attention_term_dropped"} if over else set())))
    decode_only = sorted((s for s in steps if not s["chunk_tokens"]), key=lambda s: -s["duration_s"])[:20]
    items.append(_item("steps:decode_only", "evidence/steps.csv", "the 20 longest steps without a prefill chunk",
                       [s["step"] for s in decode_only]))
    series = t.series
    items.append(_item("series:headroom", "evidence/series.csv", "samples where headroom < 0",
                       [s["time_s"] for s in series if s["headroom"] < 0],
                       {"inactive_hits_as_free", "outstanding_ignored"}))
    tail = series[-max(1, len(series) // 10):]
    leaked = sum(len(v.pages) for v in run.violations if v.kind == "leak")
    items.append(_item("series:capacity_end", "evidence/series.csv",
                       "the last tenth of the samples (columns capacity, running, waiting)",
                       [s["time_s"] for s in tail], {"reclaim_never"} if leaked else ()))
    hits, hits_before = _final_hits(run), _final_hits(before)
    items.append(_item("series:prefix_hits", "evidence/series.csv",
                       f"prefix_hits at the end of the run: {hits} pages (the previous release: {hits_before})",
                       [series[-1]["time_s"]] if series else [],
                       {"key_without_scope"} if hits > 1.1 * hits_before + 10 else ()))
    averaged = get_path(release, "release_criteria.qualification.token_deadline") == "average_tpot"
    items.append(_item("report:gate", "evidence/release_report.yaml",
                       "the release gate re-run on this workload under the release's own criteria",
                       ["gate"], {"stall_hidden_by_average"} if averaged else ()))
    return items


def _final_hits(run: Run) -> int:
    hits = run.series.columns["prefix_hits"]
    return int(hits[-1]) if len(hits) else 0


def index(items: Sequence[Item], seed: int) -> tuple[Item, ...]:
    """The items under ids E1..En, in an order drawn from the incident's seed."""
    order = np.random.Generator(np.random.PCG64(seed)).permutation(len(items))
    shuffled = [items[int(i)] for i in order]
    return tuple(replace(item, id=f"E{n + 1}") for n, item in enumerate(shuffled))
