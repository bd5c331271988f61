"""Release trials: one fixed workload under a baseline and a candidate design, on paired seeds.

A *design* is a design sheet plus the worker it runs on. A *trial* runs the reference
worker on the same requests (one seed at a time) under both designs, so a difference
between the two runs of a seed is the designs' doing and not the workload's. Each run is
boiled down to a RunSummary: per SLO class, how many requests qualified as each verdict
of lesson 5 (the oracle's qualify), over the arrival window (``window_of``). Lesson 5 grades decisions on
these summaries and the goodput experiment sweeps them over the request rate.

A *suite* file is a scenario file (grader.course.scenario) with a few more keys::

    name: release
    model: gqa-8b-bf16
    worker: l24                 # the baseline's worker
    sheet: {...}                # the baseline's design sheet
    workload: release.yaml
    seeds: 4                    # paired seeds: the workload's seed, seed + 1, ...
    rule: {min_gain: 0.02, ...} # a ReleaseRule
    candidates:                 # kind -> changes to the baseline
      gain: {worker: a80}                                   # another named worker
      noise: {worker: {reserved_bytes: 1792MiB}}            # or fields of the baseline's
      class: {worker: a80, sheet: {chunk_rule: {gap_budget_s: 0.3}}}   # sheet: merged in
    expect: {gain: ship, ...}   # what a correct release rule decides for each kind

A design's knobs distort a correct core (grader.course.core): the reference's in the
course. Design sheets may carry one section beyond the lessons': ``load_shedding:
{max_prompt_tokens: N}`` rejects at arrival every request whose prompt is longer (the
candidate that buys goodput with rejections; reference.knobs).
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Callable, Mapping

from grader.engine.codec import persistent
from grader.engine.cases import digest_of
from grader.engine.errors import InputError
from grader.engine.layout import FAMILIES, read_yaml
from grader.course.core import Core
from grader.course.core import reference as reference_core
from grader.course.scenario import (Scenario, course_machines, hidden_scenarios, load_scenario,
                                    read_families)
from reference.knobs import with_knobs
from reference.records import Run
from reference.shapes import (QUALIFICATIONS, RELEASE_DECISIONS, ClassSummary, ModelSpec,
                              ReleaseRule, RunSummary, WorkerSpec)
from reference.specs import SpecError, worker_from
from reference.workload import WorkloadSpec, generate, to_mapping
from reference.worker import simulate

KINDS = ("gain", "noise", "rejections", "class", "stalls")


# ---- designs ---------------------------------------------------------------------------
@persistent
@dataclass(frozen=True)
class Design:
    name: str
    sheet: Mapping
    worker: WorkerSpec

    def identity(self) -> dict:
        return {"sheet": self.sheet, "worker": self.worker}


@persistent
@dataclass(frozen=True)
class Trial:
    """One release question: a baseline and a candidate on the same workload and seeds."""
    name: str
    kind: str                   # one of KINDS, or "" outside the graded suite
    model: ModelSpec
    workload: WorkloadSpec
    seeds: tuple[int, ...]
    baseline: Design
    candidate: Design
    rule: ReleaseRule
    expect: str = ""            # the decision the suite says a correct rule reaches

    def identity(self) -> dict:
        return {"model": self.model, "workload": to_mapping(self.workload), "seeds": self.seeds,
                "baseline": self.baseline.identity(), "candidate": self.candidate.identity(),
                "rule": self.rule}

    def runs(self, core: Core | None = None) -> tuple[tuple[RunSummary, ...], tuple[RunSummary, ...]]:
        return (summaries(self.model, self.baseline, self.workload, self.seeds, core),
                summaries(self.model, self.candidate, self.workload, self.seeds, core))


# ---- runs and summaries ---------------------------------------------------------------------
_RUNS: OrderedDict = OrderedDict()   # the worker is deterministic: one run per identity per process
_KEEP = 256


def run_design(model: ModelSpec, design: Design, workload: WorkloadSpec, seed: int,
               core: Core | None = None):
    """(requests, Run) of one design on one seed, on ``core`` (default: the reference's);
    cached, since every submission reads the same."""
    core = core or reference_core()
    key = digest_of({"model": model, "design": design.identity(), "workload": to_mapping(workload),
                     "seed": seed, "core": core.identity})
    if key in _RUNS:
        _RUNS.move_to_end(key)
        return _RUNS[key]
    requests = generate(workload, seed)
    result = (requests, simulate(model, design.worker, with_knobs(core.policy, design.sheet), requests))
    _RUNS[key] = result
    while len(_RUNS) > _KEEP:
        _RUNS.popitem(last=False)
    return result


def window_of(requests) -> float:
    """The window goodput is counted over: from the run's start to the last arrival, but
    never shorter than the longest first-token deadline (``ttft_s``) among the requests.

    It depends on the requests alone, so two runs on one seed share it. The floor is for
    bursts: five requests arriving within a few milliseconds would otherwise divide by
    almost nothing (hundreds of "good requests per second"); a good request gets its first
    token within its ttft_s, so the service was given at least that long to answer them."""
    last = max((r.arrival_s for r in requests), default=0.0)
    deadline = max((r.slo.ttft_s for r in requests), default=0.0)
    return max(last, deadline) or 1.0


# Opens every truncation note: the experiments' plots look for it (experiments.common.plot_notes).
TRUNCATED = "truncated: "


def truncation(run: Run) -> str:
    """"" for a run that finished its workload; else what stopped it and what it left undone.

    Every summary of a run that stopped early says so in these words: its unfinished
    requests count as failed (the worker records them so), but its token gaps and TPOT
    describe only what ran, and can look healthy while nothing completed."""
    if not run.aborted:
        return ""
    return (f"{TRUNCATED}{run.aborted}; {len(run.unfinished)} of {len(run.requests)} requests "
            f"unfinished, counted as failed")


def mean_tpot_s(run: Run) -> float:
    """The dashboard number: the mean over requests of (last - first token) / (tokens - 1)."""
    per = [(r.token_times[-1] - r.token_times[0]) / (len(r.token_times) - 1)
           for r in run.requests if len(r.token_times) >= 2]
    return sum(per) / len(per) if per else 0.0


def summarize(run: Run, classes: tuple[str, ...], window_s: float, seed: int,
              qualify: Callable) -> RunSummary:
    """``qualify`` is the core's; lesson 6 also counts as a gate that averages TPOT would."""
    counts = {c: dict.fromkeys(QUALIFICATIONS, 0) for c in classes}
    for r in run.requests:
        counts.setdefault(r.cls, dict.fromkeys(QUALIFICATIONS, 0))[qualify(r)] += 1
    return RunSummary(seed=seed, window_s=window_s, mean_tpot_s=mean_tpot_s(run),
                      classes=tuple(ClassSummary(cls=c, requests=sum(n.values()), **n)
                                    for c, n in counts.items()))


def truncations(model: ModelSpec, design: Design, workload: WorkloadSpec,
                seeds: tuple[int, ...], core: Core | None = None) -> dict[int, str]:
    """seed -> truncation(run), for the seeds whose run stopped early (the runs are cached)."""
    out = {}
    for seed in seeds:
        why = truncation(run_design(model, design, workload, seed, core)[1])
        if why:
            out[seed] = why
    return out


def summaries(model: ModelSpec, design: Design, workload: WorkloadSpec,
              seeds: tuple[int, ...], core: Core | None = None) -> tuple[RunSummary, ...]:
    core = core or reference_core()
    classes = tuple(c.name for c in workload.classes)
    out = []
    for seed in seeds:
        requests, run = run_design(model, design, workload, seed, core)
        out.append(summarize(run, classes, window_of(requests), seed, core.qualify))
    return tuple(out)


# ---- suites ----------------------------------------------------------------------------------
def _merge(base: Mapping, changes: Mapping) -> dict:
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in base.items()}
    for k, v in changes.items():
        out[k] = _merge(out.get(k) or {}, v) if isinstance(v, Mapping) else v
    return out


def _worker(value: Any, base: Mapping, workers: Mapping, where: str) -> WorkerSpec:
    """A named worker, or fields that change the baseline's."""
    if isinstance(value, str):
        if value not in workers:
            raise InputError(where, f"unknown worker {value!r} (known: {', '.join(sorted(workers))})")
        mapping = workers[value]
    elif isinstance(value, Mapping):
        mapping = {**base, **value}
    else:
        raise InputError(where, "expected a worker name or a mapping of worker fields")
    try:
        return worker_from(mapping, where)
    except SpecError as e:
        raise InputError(where, str(e)) from None


def rule_from(value: Any, where: str) -> ReleaseRule:
    if value is None:
        return ReleaseRule()
    known = {f.name for f in fields(ReleaseRule)}
    if not isinstance(value, Mapping) or set(value) - known:
        raise InputError(where, f"rule: expected a mapping of {', '.join(sorted(known))}")
    try:
        return ReleaseRule(**{k: float(v) for k, v in value.items()})
    except (TypeError, ValueError) as e:
        raise InputError(where, f"rule: {e}") from None


@persistent
@dataclass(frozen=True)
class Suite:
    """The graded release questions of one workload: a baseline and one candidate per kind."""
    trials: tuple[Trial, ...]


def suite_from(path: Path, course, base: Scenario | None = None, name: str | None = None) -> Suite:
    """The suite in ``path``; ``base`` replaces its baseline scenario (a hidden instance)."""
    where = str(path)
    data = read_yaml(path)
    base = base or load_scenario(path, course)
    _, workers = course_machines(course)
    base_worker = data.get("worker")
    base_mapping = workers.get(base_worker, {}) if isinstance(base_worker, str) else dict(base_worker or {})
    n = int(data.get("seeds", 4))
    seeds = tuple(base.seed + i for i in range(n))
    rule = rule_from(data.get("rule"), where)
    baseline = Design("baseline", dict(base.sheet), base.worker)
    trials = []
    for kind, change in (data.get("candidates") or {}).items():
        at = f"{where}: candidates.{kind}"
        if kind not in KINDS or not isinstance(change, Mapping):
            raise InputError(at, f"expected one of {', '.join(KINDS)} with sheet and/or worker changes")
        worker = _worker(change["worker"], base_mapping, workers, f"{at}.worker") \
            if "worker" in change else base.worker
        candidate = Design(kind, _merge(base.sheet, change.get("sheet") or {}), worker)
        expect = (data.get("expect") or {}).get(kind, "")
        if expect and expect not in RELEASE_DECISIONS:
            raise InputError(f"{where}: expect.{kind}", f"expected one of {', '.join(RELEASE_DECISIONS)}")
        trials.append(Trial(f"{name or base.name}/{kind}", kind, base.model, base.workload, seeds,
                            baseline, candidate, rule, expect))
    return Suite(tuple(trials))


def public_suites(course, lesson: str = "lesson5") -> list[Suite]:
    folder = course.assignment(lesson) / "public"
    return [suite_from(p, course) for p in sorted(folder.glob("*.suite.yaml"))]


def hidden_suites(course, secret: bytes, lesson: str = "lesson5",
                  families_path: Path | None = None, reserve: int = 0) -> list[Suite]:
    """Each hidden instance of a family: its base suite on the instance's workload and seeds
    (with ``reserve``: that many further instances, see hidden_scenarios)."""
    path = families_path or FAMILIES / f"{lesson}.yaml"
    bases = {f.name: f.base for f in read_families(path)}
    suites = []
    for case in hidden_scenarios(course, lesson, secret, path, reserve=reserve):
        family = case.name.rsplit("#", 1)[0]
        suites.append(suite_from(bases[family], course, base=case.inputs, name=case.name))
    return suites
