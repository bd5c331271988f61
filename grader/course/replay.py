"""Replaying design sheets on the reference worker: what clients got, and the release figures.

A sheet's knobs (grader.course.sheet.policy_sheet) become a grader.course.trials Design; runs and
summaries are the trials machinery's (cached, paired seeds), and release decisions are
lesson 5's ``decide_release``, both the core's (grader.course.core). One step is added here, between the run and the summary:
what the *clients* got. A request that completed on time with a reply computed from
somebody else's pages did not get a good reply. The worker records the fact as a
violation; the client sees a garbled reply (a KV page overwritten while its step ran)
or text from another tenant's prompt (a prefix hit across scopes). Such a request counts
as failed, so a release that corrupts replies loses goodput as well as safety.

Used by ``grader sheet run`` and by lesson 6 (the incident's evidence and the replay of a
learner's fixed sheet).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Sequence

from grader.engine.errors import InputError
from grader.course.sheet import policy_sheet
from grader.course import slo
from grader.course.core import Core, unconfined_note
from grader.course.core import reference as reference_core
from grader.course.trials import Design, run_design, summarize, truncation, window_of
from reference.records import VIOLATION_KINDS, Run
from reference.shapes import ModelSpec, ReleaseRule, RunSummary, WorkerSpec
from reference.workload import WorkloadSpec

# violation kind -> (which of its requests got the bad reply, what that client reported)
CLIENT_REPORTS = {
    "use_after_free": (1, "garbled"),              # (owner, taker): the taker's KV was overwritten
    "wrong_prefix_hit": (0, "garbled"),            # (reader, owner): other tokens under its prompt
    "cross_scope_hit": (0, "other_tenant_text"),   # (reader, owner): another tenant's prompt
}


def client_reports(run: Run) -> dict[str, str]:
    """Request id -> what its client reported, for the requests whose reply was corrupted."""
    out: dict[str, str] = {}
    for v in run.violations:
        who = CLIENT_REPORTS.get(v.kind)
        if who and len(v.requests) > who[0]:
            out.setdefault(v.requests[who[0]], who[1])
    return out


def delivered(run: Run) -> Run:
    """The run as its clients saw it: a completed request with a corrupted reply failed."""
    reports = client_reports(run)
    if not reports:
        return run
    records = tuple(replace(r, outcome="failed", reason=f"client reported: {reports[r.id]}")
                    if r.outcome == "completed" and r.id in reports else r for r in run.requests)
    return replace(run, requests=records)


def design(name: str, sheet: Mapping, worker: WorkerSpec) -> Design:
    """A trials Design from a full design sheet: its knobs only (words do not change a run)."""
    return Design(name, policy_sheet(sheet), worker)


@dataclass(frozen=True)
class Replay:
    """One design on one workload over paired seeds, summarised for lesson 5's rule."""
    design: Design
    summaries: tuple[RunSummary, ...]           # per seed, the clients' view qualified by the oracle
    violations: dict                            # kind -> count over the seeds
    reports: dict                               # client report -> count over the seeds
    runs: tuple                                 # (requests, Run) per seed, as the worker left them
    seeds: tuple = ()                           # the seeds replayed, in order


def replay(model: ModelSpec, d: Design, workload: WorkloadSpec, seeds: Sequence[int], *,
           core: Core | None = None, qualify=None) -> Replay:
    """``qualify`` replaces the core's (lesson 6: the gate that averaged TPOT). A core with
    no qualify (a learner who has not written lesson 5) gives runs and no summaries."""
    core = core or reference_core()
    qualify = qualify or core.qualify
    classes = tuple(c.name for c in workload.classes)
    summaries, violations, reports, runs = [], Counter(), Counter(), []
    for seed in seeds:
        requests, run = run_design(model, d, workload, seed, core)
        if qualify is not None:
            summaries.append(summarize(delivered(run), classes, window_of(requests), seed, qualify))
        violations.update(v.kind for v in run.violations)
        reports.update(client_reports(run).values())
        runs.append((requests, run))
    return Replay(d, tuple(summaries), {k: violations.get(k, 0) for k in VIOLATION_KINDS},
                  dict(reports), tuple(runs), tuple(seeds))


# ---- comparing two replays ----------------------------------------------------------------
def class_drops(before: Sequence[RunSummary], after: Sequence[RunSummary], rule: ReleaseRule) -> list[str]:
    """The class and rejection guards of lesson 5's rule, alone: what regressed past its limit."""
    out = []
    names = sorted({c.cls for r in (*before, *after) for c in r.classes})
    for name in names:
        a, b = slo.attainment(before, name), slo.attainment(after, name)
        if a is not None and b is not None and a - b > rule.max_class_drop:
            out.append(f"class {name}: SLO attainment {a:.1%} -> {b:.1%} (more than the "
                       f"{rule.max_class_drop:.1%} allowed)")
    a, b = slo.rejected_share(before), slo.rejected_share(after)
    if b - a > rule.max_rejection_rise:
        out.append(f"rejected share {a:.1%} -> {b:.1%} (more than the {rule.max_rejection_rise:.1%} allowed)")
    return out


def goodput_fell(before: Sequence[RunSummary], after: Sequence[RunSummary], rule: ReleaseRule) -> bool:
    """Did mean paired goodput fall by more than the rule's noise band? (The reference's band:
    an incident is built in the course; the learner edition has it recorded.)"""
    from grader.engine.oracle import reference_solution
    oracle = reference_solution("lesson5")
    diffs = [slo.run_goodput(c) - slo.run_goodput(b) for b, c in oracle.paired(before, after)]
    if not diffs:
        return False
    band = oracle.noise_band(diffs, rule.noise_k)
    return sum(diffs) / len(diffs) < -band


def new_violations(before: Replay, after: Replay) -> dict[str, tuple[int, int]]:
    """kind -> (before, after) for every kind the second replay has more of."""
    return {k: (before.violations[k], n) for k, n in after.violations.items() if n > before.violations[k]}


def rollback_conditions(before: Replay, after: Replay, rule: ReleaseRule) -> dict[str, bool]:
    """Which of the design sheet's rollback conditions the change before -> after meets."""
    drops = class_drops(before.summaries, after.summaries, rule)
    return {"class_drop": any(d.startswith("class ") for d in drops),
            "rejection_rise": any(d.startswith("rejected ") for d in drops),
            "goodput_fell_beyond_band": goodput_fell(before.summaries, after.summaries, rule),
            "new_violation": bool(new_violations(before, after))}


# ---- figures for people ----------------------------------------------------------------------
def _ms(x: float) -> float:
    return round(x * 1000, 2)


def _first_violations(r: Replay) -> dict:
    """Per kind, where to start reading: the earliest one of the first seed that has one."""
    first: dict = {}
    for seed, (_, run) in zip(r.seeds, r.runs):
        for v in sorted(run.violations, key=lambda v: v.time_s):
            if v.kind not in first:
                first[v.kind] = {"seed": seed, "time_s": round(v.time_s, 3), "requests": list(v.requests),
                                 "detail": v.detail}
    return first


def figures(r: Replay) -> dict:
    """The release-relevant figures of a replay, pooled over its seeds. Without summaries (a
    core with no qualify) the classes say what their requests became, and there is no goodput."""
    gaps = sorted(max((b - a for a, b in zip(rec.token_times, rec.token_times[1:])), default=0.0)
                  for _, run in r.runs for rec in run.requests if len(rec.token_times) >= 2)
    truncated = [{"seed": seed, "why": truncation(run), "unfinished": len(run.unfinished)}
                 for seed, (_, run) in zip(r.seeds, r.runs) if run.aborted]
    out = {"seeds": list(r.seeds),
           "requests": sum(len(run.requests) for _, run in r.runs),
           "completed": sum(rec.outcome == "completed" for _, run in r.runs for rec in run.requests),
           "truncated": truncated,
           "p99_largest_gap_ms": _ms(gaps[min(len(gaps) - 1, int(0.99 * len(gaps)))]) if gaps else 0.0,
           "violations": {k: n for k, n in r.violations.items() if n},
           "first_violations": _first_violations(r), "client_reports": r.reports}
    if not r.summaries:
        outcomes: dict = {}
        for _, run in r.runs:
            for rec in delivered(run).requests:
                row = outcomes.setdefault(rec.cls, Counter())
                row["requests"] += 1
                row[rec.outcome] += 1
        return {**out, "goodput_rps": None, "outcomes": {k: dict(v) for k, v in sorted(outcomes.items())}}
    classes = {}
    for name in sorted({c.cls for s in r.summaries for c in s.classes}):
        rows = [c for s in r.summaries for c in s.classes if c.cls == name]
        counts = {k: sum(getattr(c, k) for c in rows) for k in ("requests", *QUALIFIED)}
        att = slo.attainment(r.summaries, name)
        classes[name] = {**counts, "attainment": None if att is None else round(att, 4)}
    return {**out,
            "goodput_rps": round(sum(slo.run_goodput(s) for s in r.summaries) / len(r.summaries), 4),
            "rejected_share": round(slo.rejected_share(r.summaries), 4),
            "mean_tpot_ms": _ms(sum(s.mean_tpot_s for s in r.summaries) / len(r.summaries)),
            "classes": classes}


QUALIFIED = ("good", "late_first_token", "slow_tokens", "rejected", "failed", "excluded")


def _table(rows: dict, head: tuple[str, ...], last: str = "") -> list[str]:
    w = max([len("class")] + [len(n) for n in rows])
    lines = [f"  {'class':<{w}}" + "".join(f"  {h:>{len(h)}}" for h in head) + (f"  {last}" if last else "")]
    for name, c in rows.items():
        tail = ""
        if last:
            tail = "  " + ("-" if c.get(last) is None else f"{c[last]:.1%}").rjust(len(last))
        lines.append(f"  {name:<{w}}" + "".join(f"  {c.get(h, 0):>{len(h)}}" for h in head) + tail)
    return lines


def render_figures(title: str, f: dict) -> str:
    lines = [f"{title}  (seeds {', '.join(map(str, f['seeds']))})"]
    # A truncated run first: what follows describes only the part that ran.
    lines += [f"  TRUNCATED, seed {t['seed']}: {t['why']}" for t in f["truncated"]]
    done = f"  completed {f['completed']} of {f['requests']} requests   "
    if f["goodput_rps"] is None:
        lines.append(done + f"goodput: not qualified (lesson 5's qualify is not written yet)   "
                            f"p99 largest gap {f['p99_largest_gap_ms']:.1f} ms")
    else:
        lines.append(done + f"goodput {f['goodput_rps']:.3f} req/s   rejected {f['rejected_share']:.1%}   "
                            f"mean TPOT {f['mean_tpot_ms']:.1f} ms   p99 largest gap "
                            f"{f['p99_largest_gap_ms']:.1f} ms")
    if f["truncated"]:
        lines.append("  (TPOT and gaps cover only the tokens emitted before the runs stopped)")
    if f["goodput_rps"] is None:
        lines += _table(f["outcomes"], ("requests", "completed", "cancelled_by_client", "rejected", "failed"))
    else:
        lines += _table(f["classes"], ("requests", *QUALIFIED), "attainment")
    v = ", ".join(f"{k} {n}" for k, n in f["violations"].items()) or "none"
    lines.append(f"  violations: {v}")
    for kind, at in f.get("first_violations", {}).items():
        who = ", ".join(at["requests"]) or "no request"
        lines.append(f"    first {kind}: {who} at {at['time_s']:.3f} s (seed {at['seed']})"
                     + (f": {at['detail']}" if at["detail"] else ""))
    reports = ", ".join(f"{k} {n}" for k, n in f["client_reports"].items()) or "none"
    lines.append(f"  client reports: {reports}")
    return "\n".join(lines)


# ---- where a sheet runs (grader sheet run) -------------------------------------------------------
INCIDENT_SCENARIO = "assignments/lesson6/public/incident.scenario.yaml"


@dataclass(frozen=True)
class Bench:
    """Where a sheet is replayed: a model and a worker, a workload, paired seeds."""
    model: ModelSpec
    worker: WorkerSpec
    workload: WorkloadSpec
    seeds: tuple[int, ...]
    source: str


def _find(name: str, sheet_path: Path, course) -> Path:
    for base in (sheet_path.parent, Path(course.root)):
        if (base / name).is_file():
            return base / name
    _lesson_left_out(name, course, "the sheet's release_criteria.workload")
    raise InputError(name, f"no such workload file (looked next to {sheet_path.name} and in {course.root})")


def _lesson_left_out(name: str, course, whose: str) -> None:
    """InputError when ``name`` is a file of a lesson this copy of the course does not hold
    (an edition of some lessons only): the sheet's own workload is lesson 5's, and a learner
    of lessons 1 and 2 read only "no such workload file", not what to run instead."""
    lesson = re.match(r"assignments/(lesson\d+)/", name)
    if lesson is None or lesson[1] in course.lessons():
        return
    held = sorted(Path(course.root).glob("assignments/lesson*/public/*.scenario.yaml"))
    example = f" (e.g. --workload {held[0].relative_to(course.root).as_posix()})" if held else ""
    raise InputError(name, f"this edition holds no {lesson[1]}, whose workload {whose} names: replay "
                           f"the sheet on a workload of a lesson it holds with --workload{example}")


# --seeds obeys what the design sheet's schema asks of release_criteria.paired_seeds: a seed
# given twice would count one run twice and shrink the noise band lesson 5's rule reads. A
# release decision (--baseline) needs two seeds at least, for a band; one replay may look at
# a single seed's run.
SEEDS_MIN, SEEDS_MAX, SEED_MAX = 2, 32, 2**31 - 1


def _paired_seeds(text: str, paired: bool) -> tuple[int, ...]:
    try:
        if not text.isascii():          # int() reads any script's digits: "４,５" were 4 and 5
            raise ValueError
        chosen = tuple(int(s) for s in text.split(","))
    except ValueError:
        raise InputError("--seeds", f"expected seeds like 4,5,6,7; got {text!r}") from None
    # The count first: the checks after it then look at 32 seeds at most.
    if len(chosen) > SEEDS_MAX:
        raise InputError("--seeds", f"at most {SEEDS_MAX} seeds; got {len(chosen)}")
    bad = next((s for s in chosen if not 0 <= s <= SEED_MAX), None)
    if bad is not None:
        raise InputError("--seeds", f"a seed is an integer from 0 to {SEED_MAX}; got {bad}")
    twice = next((s for i, s in enumerate(chosen) if s in chosen[:i]), None)
    if twice is not None:
        raise InputError("--seeds", f"seed {twice} is given twice: paired seeds are distinct")
    if paired and len(chosen) < SEEDS_MIN:
        raise InputError("--seeds", f"a release decision (--baseline) pairs runs seed by seed and "
                                    f"needs {SEEDS_MIN} to {SEEDS_MAX} seeds; got {len(chosen)}")
    return chosen


# A replay keeps every run (the figures, the plot and the first violations read them), about
# 15 KB a request, and the worker takes 1 to 1.5 ms of a core a request: a sheet of 100,000 requests
# (the schema's bound then) replayed one seed in 2.5 minutes and 1.5 GB, and the default four
# seeds and a baseline were eight such runs, silently. The schema bounds one run at 10,000
# requests; this bounds them all (requests x seeds x sheets): about two minutes, 1.2 GB.
MAX_REPLAYED_REQUESTS = 80_000


def _bounded(bench: "Bench", sides: int, sheet: Mapping, path: Path, workload: str | None) -> None:
    """InputError, naming where the count comes from, when the replays would be too large."""
    total = bench.workload.requests * len(bench.seeds) * sides
    if total <= MAX_REPLAYED_REQUESTS:
        return
    own = ((sheet.get("release_criteria") or {}).get("workload") or {}).get("requests")
    where = (f"the requests of {workload}" if workload else
             "release_criteria.workload.requests" if own is not None else f"the requests of {bench.source}")
    sheets = "the sheet and its baseline" if sides == 2 else "the sheet"
    raise InputError(str(path), f"{bench.workload.requests:,} requests ({where}) x {len(bench.seeds)} "
                                f"seeds x {sides} ({sheets}) is {total:,} requests to replay, more than "
                                f"{MAX_REPLAYED_REQUESTS:,}: give fewer requests or fewer seeds (--seeds)")


def bench_for(sheet: Mapping, sheet_path: Path, course, workload: str | None = None,
              seeds: str | None = None, paired: bool = False) -> Bench:
    """--workload (a scenario or a workload file), else the sheet's release_criteria.workload,
    else lesson 6's incident scenario; a bare workload runs on the sheet's own model and worker.
    Seeds: --seeds, else the sheet's paired_seeds, else four from the workload's seed."""
    from grader.engine.layout import read_yaml
    from grader.course.scenario import load_scenario
    from grader.course.sheet import machine_of
    from reference.workload import load_workload, with_overrides
    criteria = sheet.get("release_criteria") or {}
    own = criteria.get("workload") or {}
    if workload:
        path = Path(workload)
    elif own.get("file"):
        path = _find(own["file"], sheet_path, course)
    else:
        path = Path(course.root) / INCIDENT_SCENARIO
        if not path.is_file():
            _lesson_left_out(INCIDENT_SCENARIO, course, "a sheet without release_criteria.workload")
    data = read_yaml(path)
    if isinstance(data, Mapping) and "workload" in data:
        s = load_scenario(path, course, checked=False)
        model, worker, spec = s.model, s.worker, s.workload
    else:
        if not sheet.get("request_contract"):
            raise InputError(str(path), "a bare workload runs on the sheet's request_contract (model and "
                                        "worker); give a scenario file instead, or add the section")
        (model, worker), spec = machine_of(sheet), load_workload(path)
    if not workload:
        changes = {k: v for k, v, now in (("requests", own.get("requests"), spec.requests),
                                           ("arrival.rate", own.get("rate"), spec.arrival.rate))
                   if v is not None and v != now}
        spec = with_overrides(spec, **changes) if changes else spec
    if seeds:
        chosen = _paired_seeds(seeds, paired)
    else:
        chosen = tuple(criteria.get("paired_seeds") or range(spec.seed, spec.seed + 4))
    return Bench(model, worker, spec, chosen, str(path))


def run_sheets(sheet: Mapping, path: Path, course, workload: str | None, seeds: str | None,
               baseline: str | None, as_json: bool, plot: Path | None = None,
               core: Core | None = None, worked: Sequence = ()) -> str:
    """``grader sheet run``: the sheet's figures, and with a baseline sheet lesson 5's decision,
    on ``core`` (default: the reference's); with ``plot`` (checked by the caller) the same
    figures as a picture. ``worked``: the sheet's wrong worked numbers, which the replay does
    not read; they are reported with the baseline's, not a reason to stop."""
    import json
    from grader.course.sheet import blocking, load_sheet
    from grader.course.trials import rule_from
    core = core or reference_core()
    decision = None
    bench = bench_for(sheet, path, course, workload, seeds, paired=bool(baseline))
    _bounded(bench, 2 if baseline else 1, sheet, path, workload)
    mine = replay(bench.model, design("sheet", sheet, bench.worker), bench.workload, bench.seeds, core=core)
    out = {"file": str(path), "workload": bench.source, "figures": figures(mine),
           "core": core.note or "the reference's decisions"}
    text = [render_figures(f"{path} on {bench.source}", out["figures"])]
    if core.note:
        text.insert(0, f"decisions: {core.note}")
    wrong = [(str(path), p) for p in worked]
    if baseline:
        base, problems = load_sheet(Path(baseline), course)
        if blocking(problems):
            raise InputError(baseline, f"does not validate ({blocking(problems)[0]}); see grader sheet validate")
        wrong += [(baseline, p) for p in problems]
        before = replay(bench.model, design("baseline", base, bench.worker), bench.workload, bench.seeds,
                        core=core)
        rule = rule_from((base.get("release_criteria") or {}).get("rule"), f"{baseline}: release_criteria.rule")
        out["baseline"] = {"file": baseline, "figures": figures(before),
                           "new_violations": {k: list(v) for k, v in new_violations(before, mine).items()}}
        text += ["", render_figures(f"{baseline} (baseline)", out["baseline"]["figures"]), ""]
        if not mine.summaries:
            text.append("no release decision: lesson 5's qualify and decide_release are not written yet")
        elif core.decide is None:
            text.append("no release decision: lesson 5's decide_release is not written yet")
        else:
            decision = core.decide(before.summaries, mine.summaries, rule)
            out["baseline"].update(decision=decision.decision, reasons=list(decision.reasons))
            text.append(f"lesson 5's rule, {baseline} -> {path}: {decision.decision}")
            text += [f"  {r}" for r in decision.reasons]
        text += [f"  more {k} violations: {a} -> {b}" for k, (a, b) in new_violations(before, mine).items()]
    if plot is not None and not mine.summaries:
        text.append("no plot: the release picture is of goodput and attainment, which need lesson 5's qualify")
    elif plot is not None:
        from grader.course.plots import save_plot
        from grader.course.release_plot import release_plot
        # File names label the picture; whole paths only when the names are the same.
        short = not baseline or Path(baseline).name != path.name
        name = (lambda p: Path(p).name) if short else str
        sides = {f"{name(baseline)} (baseline)": (before, out["baseline"]["figures"])} if baseline else {}
        sides[name(path)] = (mine, out["figures"])
        out["plot"] = str(save_plot(release_plot(sides, decision, rule if baseline else None), plot))
        text.append(f"plot: {out['plot']}")
    if mine.summaries:
        gate = "your own qualify" if core.note else "the course's rules (every token's deadline)"
        text.append(f"Requests are qualified by {gate}, whatever the sheet's own gate says; the "
                    "service-cost model is synthetic.")
    failed = core.failed_calls()
    out["failed_calls"] = failed
    out["unconfined"] = core.unconfined
    if core.unconfined:
        text.append(f"note: {unconfined_note(core.unconfined)}")
    if failed:
        text.append(f"note: your functions failed on some calls (the worker's safe fallback answered "
                    f"them): {failed}")
    out["worked_problems"] = [{"file": f, **p.to_dict()}
                              for f, p in wrong]
    text += [f"note: {f}: {p} (a worked number: this replay does not read it; grader sheet validate "
             f"lists every problem)" for f, p in wrong]
    return json.dumps(out, sort_keys=True) if as_json else "\n".join(text)
