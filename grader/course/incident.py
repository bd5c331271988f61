"""Lesson 6's incidents: a release that regressed, its changes, and the faults among them.

Every incident runs the same workload (assignments/lesson6/public/incident.scenario.yaml)
and starts from the same good release, R41 (baseline.sheet.yaml). Release R42 is R41 plus
a few *changes*, each a design-sheet diff: two or three *faults* from the catalogue
(each breaks one property of the course and so has one mechanism of the lesson's taxonomy)
and one or two harmless changes, so that "every change is a cause" is a wrong answer. The
catalogue (grader/lessons/oracles/incident_catalogue.py) is every incident's answer key and
stays with the course; this module reads it only where an incident is drawn or built. The
demo and the practice incidents are drawn from its public forms, a student's from its
students' forms, which no public incident shows.

A student's incident is drawn from a key derived from the instructor secret and their id
(the same student always gets the same incident); the public demo incident is fixed by
assignments/lesson6/public/demo.incident.yaml. An incident is *settled* before use: on its
evidence seed every fault shows its mechanism in at least two evidence items, and on its
replay seeds reverting the faults demonstrably fixes the release (lesson 5's rule ships
it against R42, no class regresses against R41, no violation is above R41's). A draw that
is not settled tries other seeds, deterministically. The public practice incidents are
drawn the same way from fixed public seeds (assignments/lesson6/public/practice.yaml).

An incident is built on the reference core, in the course. What lesson 6's checks read of
it beyond its changes (the evidence items, the regression's rollback conditions, the
verdict on a fixed sheet) are figures (grader.engine.oracle.figures): recorded for the
public incidents in the learner edition, with the verdict of every fix that reverts some
of the regressed release's changes and keeps the others (``fix_neighbourhood``).
"""
from __future__ import annotations

import copy
import hashlib
import unicodedata
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from grader.engine.cases import digest_of
from grader.engine.codec import persistent
from grader.engine.errors import InputError
from grader.engine.layout import read_yaml
from grader.engine.oracle import figures, solution
from grader.course.evidence import Item, Tables, index, observe, seal, unseal
from grader.course.replay import (Replay, class_drops, design, new_violations, replay,
                           rollback_conditions)
from grader.course.scenario import Scenario, load_scenario
from grader.engine.secret import derive_seed
from grader.course.sheet import get_path, load_sheet, policy_sheet
from grader.course.trials import rule_from, run_design, truncation
from grader.course.core import reference as reference_core
from reference import yaml_words
from reference.shapes import ReleaseDecision, ReleaseRule

PREVIOUS, RELEASE, NEXT = "R41", "R42", "R43"
ATTEMPTS = 8           # seed sets an unsettled draw tries before it keeps the last
MIN_SUPPORT = 2        # evidence items that must show each fault's mechanism

# The lesson's taxonomy of mechanisms: how a design change breaks a release.
MECHANISMS = {
    "inactive_hits_as_free": "admission counts inactive prefix-cache hits as free, though reactivating "
                             "them takes pages out of capacity: promises exceed capacity (over-commit), "
                             "then running requests find no page (broken promises, preemptions)",
    "outstanding_ignored": "admission forgets the pages promised to running requests: free memory is "
                           "taken for capacity (over-commit)",
    "output_not_reserved": "admission reserves the prompt only: requests that write their output run out "
                           "of pages (broken promises)",
    "shared_pages_paid_twice": "admission pays again for prefix pages that running requests already "
                               "share: requests wait with memory free",
    "impossible_request_waits": "a request that can never fit waits at the head of the queue, and every "
                                "request behind it waits too",
    "attention_term_dropped": "the chunk rule sizes chunks by the per-token cost alone: later chunks of "
                              "long prompts, whose attention term grows, overrun the gap budget and every "
                              "decoding stream stalls",
    "stall_hidden_by_average": "steps are allowed to exceed what the token deadline allows, and the release "
                               "gate judges streams by their average time per token, which hides the stalls",
    "reclaim_before_fence": "a cancelled request's pages are released before the step that still writes "
                            "them completes: another request is given them (use-after-free, garbled replies)",
    "reclaim_never": "a cancelled request's pages are never released: capacity shrinks with every cancel "
                     "(a leak) until requests can no longer be admitted",
    "key_without_scope": "the prefix key lost its scope: a tenant hits pages another tenant published "
                         "(cross-scope hits, replies that quote another tenant's prompt)",
    "key_without_parent": "the prefix key lost its parent: a block hits a page of the same tokens at "
                          "another position (wrong prefix hits)",
    "publish_unwritten": "pages are published before their write completed (poisoned publishes)",
}


CATALOGUE = "grader.lessons.oracles.incident_catalogue"


def _catalogue():
    """The faults and harmless changes incidents are drawn from: the course's only (an
    answer key to every incident, so it does not ship with the learner edition)."""
    from importlib import import_module
    return import_module(CATALOGUE)


# What an incident's figures are made of: the reference's decisions and its release rule.
NEEDS = tuple(solution(f"lesson{n}") for n in range(1, 6))


@persistent
@dataclass(frozen=True)
class Change:
    id: str                                       # C1, C2, ... in the bundle's order
    summary: str
    diff: tuple[tuple[str, Any, Any], ...]        # (path, R41's value, R42's value)
    fault: str = ""                               # the catalogue fault, or "" when harmless
    sealed: str = ""                              # the learner edition's form: its mechanism sealed

    @property
    def mechanism(self) -> str:
        """Its fault's mechanism ("" when harmless), read from the seal in a sealed record."""
        if self.fault:
            return _catalogue().FAULTS[self.fault].mechanism
        return unseal(self.sealed, MECHANISMS) if self.sealed else ""

    def cause_seal(self, salt: str) -> str:
        return self.sealed or seal(f"{salt}{self.id}", self.mechanism)

    def entry(self) -> dict:
        return {"id": self.id, "summary": self.summary,
                "diff": [{"path": p, "from": a, "to": b} for p, a, b in self.diff]}


@persistent
@dataclass(frozen=True)
class Incident:
    id: str
    seed: int                          # draws the change order and the evidence ids
    scenario: Scenario                 # the workload on its machine
    baseline: Mapping                  # release R41's full sheet
    release: Mapping                   # release R42's full sheet
    changes: tuple[Change, ...]
    evidence_seed: int                 # the run the bundle's logs come from
    report_seeds: tuple[int, ...]      # the release report's paired seeds (in the bundle)
    replay_seeds: tuple[int, ...]      # where a fix is judged (hidden for a student's incident)
    rule: ReleaseRule
    settled: bool = True               # False: no seed set tried showed every fault (see draw)
    # A practice or demo incident: its figures are the same for everyone and kept on disk
    # (grader.engine.memo), so a check after the first replays nothing. A student's incident
    # is hidden, and its figures never leave the process.
    public: bool = False
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def faults(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.mechanism)

    @property
    def salt(self) -> str:
        return f"{self.id}.{self.seed}."

    def sealed(self) -> Incident:
        """The incident as a public case is recorded: which change has which mechanism, and
        which mechanisms each evidence item shows, sealed (grader.course.evidence.seal).
        Judged the same way; its identity, and so every figure of it, is the plain one's."""
        changes = tuple(replace(c, fault="", sealed=c.cause_seal(self.salt)) for c in self.changes)
        return replace(self, changes=changes, memo={})

    @property
    def is_sealed(self) -> bool:
        return any(c.sealed for c in self.changes)

    def identity(self) -> dict:
        return {"id": self.id, "seed": self.seed, "scenario": self.scenario.identity(),
                "changes": [c.entry() | {"cause": c.cause_seal(self.salt)} for c in self.changes],
                "seeds": [self.evidence_seed, list(self.report_seeds), list(self.replay_seeds)]}

    # ---- runs (the trials cache keeps them; the memo keeps what is derived from them) ----
    def run(self, which: str, seed: int):
        sheet = {"R41": self.baseline, "R42": self.release}[which]
        s = self.scenario
        return run_design(s.model, design(which, sheet, s.worker), s.workload, seed)[1]

    def replay(self, sheet: Mapping, seeds: tuple[int, ...] | None = None, *, qualify=None,
               name: str = "sheet") -> Replay:
        s = self.scenario
        return replay(s.model, design(name, sheet, s.worker), s.workload, seeds or self.replay_seeds,
                      qualify=qualify)

    def digest(self) -> str:
        return digest_of(self.identity())

    def evidence(self) -> tuple[Item, ...]:
        """The bundle's evidence items under their ids. Asked of figures() every time (it
        keeps them for the process): a copy kept here would answer a later `grader release`
        in the same process without recording them for the edition."""
        def observed():
            run, before = self.run(RELEASE, self.evidence_seed), self.run(PREVIOUS, self.evidence_seed)
            return index(observe(self.release, run, before, Tables.of(run)), self.seed)
        if self.is_sealed:
            def observed_sealed():
                return tuple(i.sealed_form(self.salt) for i in observed())
            return figures("lesson6-sealed-evidence", self.digest(), observed_sealed,
                           needs=NEEDS, persist=self.public)
        # Which mechanism each item shows is half a practice incident's answer: the edition
        # records the sealed form only (settling a practice incident asks for the plain one
        # while the edition is built).
        return figures("lesson6-evidence", self.digest(), observed, needs=NEEDS, persist=self.public,
                       record=False)

    def supporting(self, mechanism: str) -> list[Item]:
        return [i for i in self.evidence() if i.shows(mechanism)]


# ---- building an incident ------------------------------------------------------------------
def set_path(sheet: dict, path: str, value: Any) -> None:
    node = sheet
    *parents, last = path.split(".")
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def nested(pairs) -> dict:
    """{"a.b": v, ...} as {"a": {"b": v}} (the form of a diagnosis's fix)."""
    out: dict = {}
    for path, value in pairs:
        set_path(out, path, value)
    return out


@lru_cache(maxsize=4)
def _base(root: str) -> tuple[Scenario, dict, dict]:
    from grader.engine.layout import Course
    course = Course(Path(root))
    folder = course.assignment("lesson6") / "public"
    scenario = load_scenario(folder / "incident.scenario.yaml", course)
    path = folder / "baseline.sheet.yaml"
    sheet, problems = load_sheet(path, course)         # each problem with its line
    if problems:
        raise InputError(str(path), f"release {PREVIOUS}'s sheet does not validate: {problems[0]}")
    return scenario, sheet, _demo(folder / "demo.incident.yaml")


DEMO_KEYS = {"id": str, "seed": int, "faults": list, "harmless": list, "evidence_seed": int,
             "report_seeds": list, "replay_seeds": list}


def _demo(path: Path) -> dict:
    """The demo incident's file, every key present and of its kind, or one line naming the
    file, the line and the key, in YAML's words."""
    data = read_yaml(path)
    text = path.read_text(encoding="utf-8")
    if not isinstance(data, dict):
        raise InputError(str(path), f"expected a mapping of {', '.join(DEMO_KEYS)}; got {yaml_words.got(data)}")
    for key, kind in DEMO_KEYS.items():
        value = data.get(key)
        if key not in data:
            raise InputError(str(path), f"line {yaml_words.line_of(text, [])}: {key}: missing key (required)")
        if not isinstance(value, kind) or isinstance(value, bool):
            raise InputError(str(path), f"line {yaml_words.line_of(text, [key])}: {key}: expected "
                                        f"{yaml_words.kind(kind())}; got {yaml_words.got(value)}")
    return data


def build(course, *, id: str, seed: int, faults, harmless, evidence_seed: int,
          report_seeds, replay_seeds, public: bool = False) -> Incident:
    scenario, base, _ = _base(str(course.root))
    baseline = copy.deepcopy(base)
    baseline["release_criteria"]["paired_seeds"] = list(report_seeds)
    release = copy.deepcopy(baseline)
    g = np.random.Generator(np.random.PCG64(seed))
    catalogue = _catalogue()
    picked = [catalogue.FAULTS[n] for n in faults] + [catalogue.HARMLESS[n] for n in harmless]
    order = [picked[int(i)] for i in g.permutation(len(picked))]
    changes = []
    for n, c in enumerate(order):
        diff = tuple((p, get_path(baseline, p), v) for p, v in c.diff)
        for p, v in c.diff:
            set_path(release, p, v)
        changes.append(Change(f"C{n + 1}", c.summary, diff, c.name if isinstance(c, catalogue.Fault) else ""))
    release["change_record"].append({
        "release": RELEASE, "summary": "Faster first tokens, leaner memory, simpler tuning",
        "changes": [c.entry() for c in changes],
        "rollback": {"to": PREVIOUS, "when": list(baseline["release_criteria"]["rollback_when"])}})
    rule = rule_from(baseline["release_criteria"]["rule"], "baseline.sheet.yaml: release_criteria.rule")
    return Incident(id, seed, scenario, baseline, release, tuple(changes), int(evidence_seed),
                    tuple(int(s) for s in report_seeds), tuple(int(s) for s in replay_seeds), rule,
                    public=public)


def demo_incident(course) -> Incident:
    _, _, d = _base(str(course.root))
    return build(course, id=str(d["id"]), seed=int(d["seed"]), faults=d["faults"], harmless=d["harmless"],
                 evidence_seed=d["evidence_seed"], report_seeds=d["report_seeds"],
                 replay_seeds=d["replay_seeds"], public=True)


def practice_incidents(course) -> list[Incident]:
    """The public practice incidents: drawn like a student's (``draw``), from the fixed
    public seeds of assignments/lesson6/public/practice.yaml. Their bundles ship in
    assignments/lesson6/practice/<id>/; no file works them through."""
    path = course.assignment("lesson6") / "public" / "practice.yaml"
    from grader.engine.layout import read_yaml
    listed = (read_yaml(path) or {}).get("practice")
    if not isinstance(listed, list) or not listed:
        raise InputError(str(path), "practice: expected a list of {id, seed}")
    out = []
    for n, entry in enumerate(listed):
        where = f"{path}: practice[{n}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) \
                or type(entry.get("seed")) is not int or not entry["id"].isidentifier():
            raise InputError(where, "expected {id: a name, seed: an integer}")
        out.append(_practice(course, entry["id"], entry["seed"]))
    if len({i.id for i in out}) < len(out):
        raise InputError(str(path), "practice: two incidents share an id")
    return out


def _practice(course, id: str, seed: int) -> Incident:
    incident = draw(course, seed, id, public=True)
    if not incident.settled:
        raise InputError(f"practice incident {id}", f"seed {seed} draws an incident that does not settle")
    # Kept as a public case: what draw derived while settling it is derived again on use
    # (read back from the cache folder, where settling it kept it).
    return replace(incident, memo={})


def _paths(entries) -> list[str]:
    return [path for e in entries for path, _ in e.diff]


def _valid(names: list[str]) -> bool:
    catalogue = _catalogue()
    faults = [catalogue.FAULTS[n] for n in names]
    mechanisms = {f.mechanism for f in faults}
    return (len({f.group for f in faults}) == len(faults) and any(f.strong for f in faults)
            and not any(c <= mechanisms for c in catalogue.CONFLICTS))


def combinations(public: bool = False) -> list[tuple[str, ...]]:
    """Every fault set an incident may be drawn with (two or three faults): of the public
    forms (the demo's and the practice incidents') or of the students' forms."""
    import itertools
    names = sorted(n for n, f in _catalogue().FAULTS.items() if f.public == public)
    return [c for k in (2, 3) for c in itertools.combinations(names, k) if _valid(list(c))]


def harmless_options(faults, public: bool = False) -> list[str]:
    """The harmless changes of a pool that may join a fault set: none sets a knob one of the
    faults sets (the change would overwrite the fault, or the fault it), nor hides the
    evidence of a fault's group (fixed chunks never read the budget a chunk fault bends)."""
    catalogue = _catalogue()
    taken = set(_paths(catalogue.FAULTS[n] for n in faults))
    groups = {catalogue.FAULTS[n].group for n in faults}
    return sorted(n for n, h in catalogue.HARMLESS.items()
                  if h.public == public and not taken & set(_paths([h])) and not groups & set(h.masks))


def draw(course, seed: int, id: str, faults: tuple[str, ...] | None = None, *,
         harmless: tuple[str, ...] | None = None, public: bool = False,
         public_forms: bool | None = None) -> Incident:
    """The incident of a seed (its faults and harmless changes may be forced, for tests and
    instructors); ``public``: a practice incident, whose figures the cache folder keeps. Its
    changes are the catalogue's public forms, a student's are the students' forms
    (``public_forms`` forces either)."""
    shown = public if public_forms is None else public_forms
    g = np.random.Generator(np.random.PCG64(seed))
    options = combinations(shown)
    chosen = faults or options[int(g.integers(len(options)))]
    # Harmless changes are drawn pairwise apart: no two of one pool set the same knob.
    eligible = harmless_options(chosen, shown)
    picked = list(harmless or [eligible[int(i)] for i in g.choice(len(eligible), int(g.integers(1, 3)),
                                                                replace=False)])
    incident = None
    for attempt in range(ATTEMPTS):
        s = np.random.Generator(np.random.PCG64([seed, attempt]))
        first = int(s.integers(1000, 2**30))
        hidden = int(s.integers(1000, 2**30))
        incident = build(course, id=id, seed=seed, faults=chosen, harmless=picked, evidence_seed=first,
                         report_seeds=range(first, first + 4), replay_seeds=range(hidden, hidden + 4),
                         public=public)
        if settled(incident):
            return incident
    return replace(incident, settled=False, memo={})


# ---- students -----------------------------------------------------------------------------------
def incidents_key(secret: bytes) -> str:
    """The per-course key students' incidents are drawn from (never the secret itself)."""
    return derive_seed(secret, "lesson6", "incidents").to_bytes(8, "big").hex()


def student_incident(course, key: str, student: str) -> Incident:
    # NFC: "José" typed on one machine and read from a macOS zip's file name on another
    # (decomposed, NFD) is one student with one incident.
    name = unicodedata.normalize("NFC", student.replace("\x1f", " "))
    seed = derive_seed(bytes.fromhex(key), "lesson6", name)
    return draw(course, seed, f"i{hashlib.sha256(str(seed).encode()).hexdigest()[:8]}")


# ---- judging a fix --------------------------------------------------------------------------------
@persistent
@dataclass(frozen=True)
class FixVerdict:
    problems: tuple[str, ...]          # why the fix is not demonstrated ("" when it is)
    decision: ReleaseDecision          # lesson 5's rule: R42 -> the fixed sheet

    @property
    def passed(self) -> bool:
        return not self.problems


def judge_fix(incident: Incident, sheet: Mapping) -> FixVerdict:
    """Replay a fixed sheet on the replay seeds: it must ship against R42 under lesson 5's rule,
    no class may regress against R41, and no violation may be above R41's. Words in the sheet
    do not change a replay, so the verdict is keyed by the sheet's knobs."""
    key = digest_of([incident.identity(), policy_sheet(sheet)])
    return figures("lesson6-fix", key, lambda: _judge_fix(incident, sheet), needs=NEEDS,
                   persist=incident.public)


def _judge_fix(incident: Incident, sheet: Mapping) -> FixVerdict:
    before = incident.replay(incident.baseline, name=PREVIOUS)
    regressed = incident.replay(incident.release, name=RELEASE)
    fixed = incident.replay(sheet)
    decision = reference_core().decide(regressed.summaries, fixed.summaries, incident.rule)
    problems = []
    if decision.decision != "ship":
        problems.append(f"against {RELEASE} lesson 5's rule decides {decision.decision}: "
                        f"{'; '.join(decision.reasons)}")
    problems += [f"against {PREVIOUS}, {d}" for d in class_drops(before.summaries, fixed.summaries, incident.rule)]
    problems += [f"your sheet's run on seed {s.seed} is {truncation(run)}"
                 for s, (_, run) in zip(fixed.summaries, fixed.runs) if run.aborted]
    for kind, (was, now) in new_violations(before, fixed).items():
        first = next(v for _, run in fixed.runs for v in run.violations if v.kind == kind)
        problems.append(f"{now} {kind} violations on your sheet's runs, {was} on {PREVIOUS}'s; the first: "
                        f"{first.detail or ', '.join(first.requests)}")
    return FixVerdict(tuple(problems), decision)


def regression(incident: Incident, rule: ReleaseRule | None = None) -> dict[str, bool]:
    """Which rollback conditions R41 -> R42 meets on the replay seeds, under a release rule's
    thresholds (R41's when none is given: the rule a release that rolls back states its own)."""
    rule = rule or incident.rule
    key = incident.digest() if rule == incident.rule else digest_of([incident.digest(), rule])
    return figures("lesson6-regression", key,
                   lambda: rollback_conditions(incident.replay(incident.baseline, name=PREVIOUS),
                                               incident.replay(incident.release, name=RELEASE), rule),
                   needs=NEEDS, persist=incident.public)


def fix_neighbourhood(incident: Incident) -> list[dict]:
    """R42 with every subset of its changes reverted: the fixes the learner edition can judge
    without the reference (their verdicts are recorded when it is built)."""
    sheets = []
    for mask in range(1 << len(incident.changes)):
        sheet = copy.deepcopy(dict(incident.release))
        for n, change in enumerate(incident.changes):
            if mask >> n & 1:
                for path, was, _ in change.diff:
                    set_path(sheet, path, was)
        sheets.append(sheet)
    return sheets


def settled(incident: Incident) -> bool:
    if any(len(incident.supporting(c.mechanism)) < MIN_SUPPORT for c in incident.faults):
        return False
    return judge_fix(incident, reference_sheet(incident)).passed


# ---- the reference answer -------------------------------------------------------------------------
def reference_sheet(incident: Incident) -> dict:
    """R42 with every fault reverted (the harmless changes kept), recorded as release R43."""
    sheet = copy.deepcopy(dict(incident.release))
    entries = []
    for n, change in enumerate(incident.faults):
        for path, was, _ in change.diff:
            set_path(sheet, path, was)
        entries.append({"id": f"F{n + 1}", "fixes": change.id, "summary": f"Revert {change.id}",
                        "diff": [{"path": p, "from": b, "to": a} for p, a, b in change.diff]})
    sheet["change_record"].append({
        "release": NEXT, "summary": f"Revert the changes of {RELEASE} that caused the incident",
        "changes": entries,
        "rollback": {"to": PREVIOUS, "when": ["class_drop", "rejection_rise", "goodput_fell_beyond_band",
                                             "new_violation"],
                     "how": f"redeploy {PREVIOUS}'s sheet"}})
    return sheet


def reference_diagnosis(incident: Incident) -> dict:
    causes = []
    for change in incident.faults:
        cited = [i.id for i in incident.supporting(change.mechanism)][:4]
        causes.append({"change": change.id, "mechanism": change.mechanism, "evidence": cited,
                       "fix": nested((p, was) for p, was, _ in change.diff)})
    return {"incident": incident.id, "causes": causes}
