"""Scenarios: a workload on a model and a worker under a design sheet, public or hidden.

Lessons 2 to 6 grade a policy by running the reference worker on scenarios. A public
scenario is a YAML file in ``assignments/lessonN/public/``; a hidden one is an instance
of a family (``grader/instructor/families/lessonN.yaml``): the family's base scenario with some
fields drawn from ranges by a seed derived from the instructor secret. The same secret
always yields the same instance; the instance's digest names it in reports.

Scenario file::

    name: heavy-load
    model: gqa-8b-bf16          # a name in assignments/worker.yaml, or a mapping
    worker: a24                 # likewise
    sheet: {chunk_rule: {gap_budget_s: 0.1}}   # design-sheet knobs (reference.knobs) of its runs
    workload: heavy.yaml        # a workload file next to this one, or a mapping

Family file::

    families:
      - name: heavy-load
        base: ../../assignments/lesson2/public/heavy.yaml   # relative to the family file
        instances: 2
        vary:                   # dotted workload keys (or worker.X / sheet.X.Y) -> [low, high]
          requests: [600, 900]
          arrival.rate: [6.0, 10.0]
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from grader.engine.cases import Case
from grader.engine.codec import persistent
from grader.engine.layout import FAMILIES, Field, read_field, read_yaml
from grader.engine.errors import InputError
from grader.engine.secret import derive_seed
from reference.knobs import KNOBS, knob_problem
from reference.policy import Policy
from reference.records import Run
from reference.shapes import ModelSpec, WorkerSpec
from reference.sizing import Geometry, pool_too_large
from reference.specs import SpecError, model_from, worker_from
from reference.workload import (WorkloadError, WorkloadSpec, generate, load_workload,
                                parse_workload, to_mapping, with_overrides)
from reference.worker import simulate


@persistent
@dataclass(frozen=True)
class Scenario:
    name: str
    model: ModelSpec
    worker: WorkerSpec
    sheet: Mapping
    workload: WorkloadSpec
    seed: int

    def requests(self):
        """The workload's requests, generated on first use and shared by every run of the
        scenario (a lesson 3 grade spent 3% of its CPU generating them again): a request
        is frozen and its prompt is a read-only array, so no run can change another's."""
        made = self.__dict__.get("_requests")
        if made is None:
            made = generate(self.workload, self.seed)
            object.__setattr__(self, "_requests", made)
        return made

    def __getstate__(self):
        # A pickled scenario (to a Dask worker) travels without its requests: they are
        # made again there, from the fields, on first use.
        return {k: v for k, v in self.__dict__.items() if k != "_requests"}

    def run(self, policy: Policy, **kw) -> Run:
        """The workload under ``policy`` (already under this scenario's knobs)."""
        return simulate(self.model, self.worker, policy, self.requests(), **kw)

    def identity(self) -> dict:
        """Everything that determines the run: what a hidden case's digest is taken of."""
        return {"model": self.model, "worker": self.worker, "sheet": self.sheet,
                "workload": to_mapping(self.workload), "seed": self.seed}


def named(value: Any, table: Mapping, kind: str, where: str):
    if isinstance(value, str):
        if value not in table:
            raise InputError(where, f"unknown {kind} {value!r} (known: {', '.join(sorted(table))})")
        return table[value]
    return value


def course_machines(course) -> tuple[dict, dict]:
    """The named models and workers of assignments/worker.yaml (mappings, unparsed)."""
    top = read_field(course.root / "assignments" / "worker.yaml")
    top.mapping(known=("models", "workers"))
    return dict(top.at("models").mapping()), dict(top.at("workers").mapping())


SCENARIO_KEYS = ("name", "model", "worker", "sheet", "workload")
# A release suite (lesson 5's *.suite.yaml) is a scenario, its baseline, with its trials.
SUITE_KEYS = (*SCENARIO_KEYS, "seeds", "rule", "candidates", "expect")


def load_scenario(path: Path, course, checked: bool = True) -> Scenario:
    """``checked``: the file may have only a scenario's keys (a suite's, for *.suite.yaml):
    a course file's misspelt `shet:` would otherwise run it on the default design. False
    for a learner's --workload, which may be a bundle's file with keys of its own."""
    where = str(path)
    data = read_yaml(path)
    if not isinstance(data, Mapping):
        raise InputError(where, "a scenario is a mapping with name, model, worker, workload")
    if checked:
        Field(path, (), data).mapping(known=SUITE_KEYS if path.name.endswith(".suite.yaml")
                                      else SCENARIO_KEYS)
    models, workers = course_machines(course)
    try:
        model = model_from(named(data.get("model"), models, "model", f"{where}: model"),
                           f"{where}: model")
        worker = worker_from(named(data.get("worker"), workers, "worker", f"{where}: worker"),
                             f"{where}: worker")
        wl = data.get("workload")
        if isinstance(wl, str):
            workload = load_workload(path.parent / wl)
        elif isinstance(wl, Mapping):
            workload = parse_workload(dict(wl), f"{where}: workload")
        else:
            raise InputError(where, "workload: expected a file name or a mapping")
    except (SpecError, WorkloadError) as e:
        text = str(e)          # a spec's error names this file already; a workload's, its own
        raise InputError(where, text.removeprefix(f"{where}: ")) from None
    too_large = pool_too_large(Geometry.of(model, worker))
    if too_large:
        raise InputError(where, f"worker: {too_large}")
    sheet = data.get("sheet") or {}
    if not isinstance(sheet, Mapping):
        raise InputError(where, "sheet: expected a mapping of design-sheet sections")
    # The knobs' defaults change nothing: a misspelt knob or value would grade the
    # scenario under the default design in silence.
    for section, knobs in Field(path, (), data).at("sheet", None).entries():
        problem = knob_problem(section)
        if problem:
            raise knobs.problem(problem)
        for knob, value in knobs.entries():
            problem = knob_problem(section, knob, value.value)
            if problem:
                raise value.problem(problem)
    return Scenario(str(data.get("name", path.stem)), model, worker, dict(sheet), workload,
                    int(workload.seed))


def public_scenarios(course, lesson: str) -> list[Case]:
    folder = course.assignment(lesson) / "public"
    cases = []
    for path in sorted(folder.glob("*.yaml")):
        data = read_yaml(path)
        if isinstance(data, Mapping) and "workload" in data:   # a scenario, not a bare workload
            s = load_scenario(path, course)
            cases.append(Case("scenario", s.name, "public", s, f"public scenario {s.name}"))
    return cases


def _set(mapping: dict, dotted: str, value: Any) -> None:
    node = mapping
    *parents, last = dotted.split(".")
    for p in parents:
        node = node.setdefault(p, {})
    node[last] = value


def _draw(g: np.random.Generator, bounds: tuple):
    lo, hi = bounds
    if isinstance(lo, int) and isinstance(hi, int):
        return int(g.integers(lo, hi + 1))
    return float(g.uniform(float(lo), float(hi)))


@dataclass(frozen=True)
class Family:
    """One family of a hidden-families file, checked: every field a problem could hide in
    is named (file, line, place) when it is wrong, before anything is drawn."""
    name: str
    base: Path
    instances: int
    vary: tuple[tuple[str, tuple], ...]      # (dotted key, (low, high)), sorted by key


FAMILY_KEYS = ("name", "base", "instances", "vary")
_WORKER_FIELDS = ("device_bytes", "reserved_bytes", "page_tokens", "max_running")


def read_families(path: Path) -> tuple[Family, ...]:
    top = read_field(path)
    top.mapping(known=("families",))
    listed = top.at("families")
    families, names = [], set()
    for fam in listed.items():
        fam.mapping(known=FAMILY_KEYS)
        name = fam.at("name").text()
        if name in names:
            raise fam.at("name").problem(f"a second family named {name!r}: each draws its own "
                                         "instances from the secret, so names must differ")
        names.add(name)
        vary = []
        for key, bounds in fam.at("vary", None).entries():
            if key.startswith("worker.") and key[7:] not in _WORKER_FIELDS:
                raise bounds.problem(f"{key[7:]!r} is not a worker field (known: "
                                     f"{', '.join(_WORKER_FIELDS)})")
            if key.startswith("sheet."):
                section, _, knob = key[6:].partition(".")
                problem = knob_problem(section) or (knob not in KNOBS[section] and
                                                    knob_problem(section, knob or "(none)"))
                if problem:
                    raise bounds.problem(problem)
            ends = bounds.items()
            if len(ends) != 2:
                raise bounds.problem(f"expected [low, high]; got {bounds.value!r}")
            lo, hi = (end.number() for end in ends)
            if lo > hi:
                raise bounds.problem(f"low {lo} is above high {hi}")
            vary.append((str(key), (lo, hi)))
        base = (path.parent / fam.at("base").text()).resolve()
        if not base.is_file():
            raise fam.at("base").problem(f"no such scenario file {base} (a path relative to this file)")
        families.append(Family(name, base, fam.at("instances", 1).integer(minimum=1),
                               tuple(sorted(vary))))
    if not families:
        # An emptied file would grade on the public cases alone and say nothing.
        raise listed.problem("expected at least one family (a lesson's hidden cases come from them)")
    return tuple(families)


def hidden_scenarios(course, lesson: str, secret: bytes, families_path: Path | None = None,
                     reserve: int = 0) -> list[Case]:
    """Each family's instances drawn from the secret; with ``reserve``, that many further
    instances after them instead (for a grader that keeps only the draws that settle)."""
    path = families_path or FAMILIES / f"{lesson}.yaml"
    cases = []
    for fam in read_families(path):
        where = f"{path}: families.{fam.name}"
        base = load_scenario(fam.base, course)
        count = fam.instances
        for i in range(count, count + reserve) if reserve else range(count):
            g = np.random.Generator(np.random.PCG64(derive_seed(secret, lesson, fam.name, str(i))))
            wl_changes, worker_changes, sheet = {}, {}, _deep_copy(base.sheet)
            for key, bounds in fam.vary:
                value = _draw(g, bounds)
                if key.startswith("worker."):
                    worker_changes[key[7:]] = value
                elif key.startswith("sheet."):
                    _set(sheet, key[6:], value)
                else:
                    wl_changes[key] = value
            try:
                workload = with_overrides(base.workload, **wl_changes) if wl_changes else base.workload
                worker = replace(base.worker, **worker_changes)
            except (WorkloadError, TypeError) as e:
                raise InputError(where, f"cannot vary the base scenario: {e}") from None
            s = Scenario(f"{fam.name}#{i}", base.model, worker, sheet, workload,
                         int(g.integers(0, 2**31)))
            cases.append(Case("scenario", s.name, "hidden", s, f"hidden scenario {fam.name}"))
    return cases


@dataclass(frozen=True)
class Purpose:
    """What every hidden instance of a family is there to show, and a test of a Scenario
    that says whether it shows it (before any learner code runs)."""
    what: str
    shows: Callable[["Scenario"], bool]


RESERVE = 9               # further instances a family may draw from when a draw misses its point


def purposeful_scenarios(course, lesson: str, secret: bytes, purposes: Mapping[str, Purpose],
                         reserve: int = RESERVE) -> list[Case]:
    """The hidden scenarios, where an instance of a family with a purpose is kept only when
    it shows what the family is for. Families draw their fields at random, and a draw can
    miss a rare event (a never-fit workload whose draws all fit): that secret would leave a
    criterion without the evidence its family exists to give. Such an instance is replaced
    by the family's next further instance that shows it; when none of ``reserve`` does,
    grading stops and says so rather than grade weaker."""
    path = FAMILIES / f"{lesson}.yaml"
    family = lambda case: case.name.rsplit("#", 1)[0]
    spare: list[Case] | None = None
    kept = []
    for case in hidden_scenarios(course, lesson, secret):
        purpose = purposes.get(family(case))
        if purpose is None or purpose.shows(case.inputs):
            kept.append(case)
            continue
        if spare is None:
            spare = hidden_scenarios(course, lesson, secret, reserve=reserve)
        found = next((c for c in spare if family(c) == family(case) and purpose.shows(c.inputs)), None)
        if found is None:
            raise InputError(f"{path}: families.{family(case)}",
                             f"under this secret neither {case.name} nor any of {reserve} further "
                             f"instances has {purpose.what}; widen vary or change the base workload")
        spare = [c for c in spare if c is not found]
        kept.append(found)
    return kept


def _deep_copy(m: Mapping) -> dict:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in m.items()}
