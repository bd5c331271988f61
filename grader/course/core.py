"""The correct core a design is run on: six decisions and the gate that qualifies requests.

A *design* (a design sheet plus the worker it runs on) says which knobs distort the core
(reference.knobs); the core says what the undistorted decisions are, and how a run's
requests are qualified against their SLOs (lesson 5's qualify) and a release decided. In
the course the core is the reference's. In the learner edition, ``grader sheet run`` and
the experiments run the learner's *own* functions as the core (each lesson's file in a
sandbox of its own), with the course baselines for the decisions of a lesson not written
yet; a learner who has not written lesson 5 gets the runs' facts without qualification.
Runs of one core are cached under its identity, so two cores never share a run.
"""
from __future__ import annotations

import hashlib
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional

from reference.policy import Policy
from reference.shapes import (AdmissionRequest, ChunkContext, ClassSummary, CostModel, LedgerView,
                              ModelSpec, PageInfo, ReleaseRule, RequestView, RunSummary, Slo,
                              WorkerSpec)


@dataclass(frozen=True)
class Core:
    identity: str                  # what the decisions are: "reference", or the learner files' digests
    policy: Policy                 # the six decisions, before any knob
    qualify: Optional[Callable]    # (RequestRecord, Slo | None) -> one of QUALIFICATIONS; None: not written
    decide: Optional[Callable]     # (baseline runs, candidate runs, ReleaseRule) -> ReleaseDecision
    note: str = ""                 # how a report names it, when it is not the reference
    # The learner's failed calls so far, in words ("" none): a replay's figures where one
    # failed are partly the worker's fallback's, and the report says so after the runs.
    failed_calls: Callable[[], str] = field(default=lambda: "", compare=False)
    # What the sandboxes of the learner's files lack to confine them ("" when they are
    # confined, or no learner code runs): a report run on them says so, as a check does.
    unconfined: str = field(default="", compare=False)


def unconfined_note(lacks: str) -> str:
    """What a run on the learner's functions says where their sandbox could not confine
    them: it still runs (the learner's own code, as ``grader check`` runs it), and says so."""
    return (f"not confined: your functions could read and write whatever this user can (the "
            f"sandbox here lacks {lacks})")


@lru_cache(maxsize=1)
def reference() -> Core:
    """The reference's decisions and qualify. OracleMissing where the solutions are absent."""
    from grader.engine.oracle import reference_core, reference_solution
    gate = reference_solution("lesson5")
    return Core("reference", reference_core(), gate.qualify, gate.decide_release)


def default(course, own: bool | None = None) -> tuple[Core, ExitStack]:
    """The reference where it is here and ``own`` is not asked for, else the learner's own."""
    from grader.engine.oracle import has_solution
    if not own and all(has_solution(f"lesson{n}") for n in range(1, 6)):
        return reference(), ExitStack()
    stack = ExitStack()
    return stack.enter_context(own_core(course)), stack


# ---- the learner's own functions ------------------------------------------------------------
_MODEL = ModelSpec("probe", layers=2, kv_heads=1, head_dim=8, dtype_bytes=2, max_context=4096, weight_bytes=0)
_WORKER = WorkerSpec(device_bytes=1 << 24, reserved_bytes=0, page_tokens=16, max_running=8)
# One call per function that tells a written function from the stub (it raises
# NotImplementedError) before any run depends on it.
PROBES = {
    "check_contract": (RequestView("probe", "s", 32, 16, Slo(10.0, 1.0)), _MODEL, _WORKER),
    "admit": (AdmissionRequest("probe", "s", 32, 16, 16, 0, 0), LedgerView(64, 64, 0, 0, 0)),
    "choose_chunk": (ChunkContext(0.1, CostModel(), (), 0, 64, 16, 16),),
    "on_event": ("waiting", "admit", False),
    "prefix_key": ("s", "", (1, 2, 3)),
    "publishable": ((PageInfo(0, 16, 16, 16, False),),),
    "decide_release": ((RunSummary(1, 10.0, (ClassSummary("c", 4, good=4),)),),) * 2 + (ReleaseRule(),),
}
OWN_BUDGET_S = 3600.0
FILES = {1: "check_contract", 2: "admit", 3: "choose_chunk", 4: "on_event prefix_key publishable",
         5: "qualify decide_release"}
# What stands in for each function not written (reference/baselines.py), said where it
# stands in: a baseline is not the design a sheet's knobs vary, so a replay of two sheets
# that differ in those knobs can come out alike, and lesson 4's records its requests as
# scheduled after their cancel. A learner reads why here, not in the baselines' source.
# Named per function: a lesson half written is described by what is missing only.
BASELINE = {"check_contract": "a contract that knows no deadline",
            "admit": "worst-case reservations with nothing shared",
            "choose_chunk": "fixed chunks, whatever the gap budget",
            "on_event": "cancellation deferred to the request's end: recorded as scheduled after its cancel",
            "prefix_key": "the worker's own prefix keys, which no knob of the sheet changes",
            "publishable": "the worker's own publishing, which no knob of the sheet changes"}


def _baseline(names) -> str:
    return f"the course baseline ({'; '.join(BASELINE[name] for name in names)})"


def _standing(sandbox, function: str) -> str:
    """"written", "stub" (it raises NotImplementedError) or "absent" (the file defines no
    such function: likely another lesson's file)."""
    result = sandbox.call(function, *PROBES[function])
    return "absent" if result.status == "missing" else "stub" if result.stub else "written"


@dataclass(frozen=True)
class Written:
    """One lesson's file, opened in a sandbox: what it decides, and what it does not yet."""
    lesson: str
    path: Path
    digest: str                    # the submission's digest: part of a core's identity
    decisions: dict                # policy fields of its written functions (lessons 1 to 4)
    gate: Optional[tuple]          # (qualify, decide) of lesson 5 when qualify is written;
                                   # decide None while decide_release is not
    missing: tuple[str, ...]       # its functions that are not written (or did not load)
    note: str                      # what falls back and why; "" when everything is written
    log: object = None             # the CallLog of its sandboxed decisions
    error: str = ""                # why the file did not load ("" when it did)
    absent: tuple[str, ...] = ()   # of missing, those the file does not define at all
    unconfined: str = ""           # what its sandbox lacks to confine it ("" when confined)


def open_lesson(stack: ExitStack, lesson: str, path: Path) -> Written:
    """The learner's functions of ``lesson`` in ``path``, each call in a sandbox that lives
    as long as ``stack``; the stub's functions (they raise NotImplementedError) are missing."""
    from grader.engine.submission import load_submission
    from grader.engine.sandbox.session import Sandbox
    sub = load_submission(path)
    # The learner's own tool, not a grade: a replay may ask for many thousands of
    # decisions, so the whole-run budget is an hour (each call keeps its limit).
    sandbox = stack.enter_context(Sandbox(sub.source, path.name, run_timeout_s=OWN_BUDGET_S,
                                          cells=sub.cells))
    # The learner's code has run (its load) whatever it defines: where the sandbox could not
    # confine it, every way out says so.
    return replace(_opened(lesson, path, sub, sandbox), unconfined=sandbox.lacks)


def _opened(lesson: str, path: Path, sub, sandbox) -> Written:
    from grader.engine.learner_policy import CallLog, learner_decisions
    n = int(lesson.removeprefix("lesson"))
    names = tuple(FILES[n].split())
    if sandbox.load_error:
        return Written(lesson, path, sub.digest, {}, None, names,
                       f"{lesson}: {path} did not load ({sandbox.load_error}): "
                       + ("no goodput or attainment" if n == 5 else _baseline(names)),
                       error=sandbox.load_error)
    if n == 5:
        if not _qualifies(sandbox):
            return Written(lesson, path, sub.digest, {}, None, names,
                           f"{lesson}: qualify is not written yet: no goodput or attainment")
        qualify, decide = _gate(sandbox, path)
        if _standing(sandbox, "decide_release") == "written":
            return Written(lesson, path, sub.digest, {}, (qualify, decide), (), "")
        # qualify comes first in the lesson: its figures stand without a decision.
        return Written(lesson, path, sub.digest, {}, (qualify, None), ("decide_release",),
                       f"{lesson}: decide_release is not written yet: no release decision")
    standing = {name: _standing(sandbox, name) for name in names}
    wanted = tuple(name for name in names if standing[name] == "written")
    missing = tuple(name for name in names if name not in wanted)
    absent = tuple(name for name in names if standing[name] == "absent")
    log = CallLog()
    decisions = learner_decisions(sandbox, wanted, log, gives_up=True)
    if "prefix_key" in decisions:
        # Every request asks again for the keys of the blocks it shares with others.
        decisions["prefix_key"] = lru_cache(maxsize=1 << 16)(decisions["prefix_key"])
    stubs = [name for name in names if standing[name] == "stub"]
    why = ([f"{', '.join(stubs)} not written yet"] if stubs else []) + \
          ([f"{', '.join(absent)} not defined in {path.name} (is it {lesson}'s exercise file?)"] if absent else [])
    note = f"{lesson}: {'; '.join(why)}: {_baseline(missing)}" if why else ""
    return Written(lesson, path, sub.digest, decisions, None, missing, note, log, absent=absent)


@contextmanager
def own_core(course, files: Mapping[str, Path] | None = None) -> Iterator[Core]:
    """The learner's functions of lessons 1 to 5 (``files``, default each lesson's
    assignments/lessonN/exercise.py) as the core, for as long as the block runs."""
    from reference.baselines import baseline_policy
    policy, notes, digest, logs = baseline_policy(), [], hashlib.sha256(), []
    qualify = decide = None
    lacks: dict[str, None] = {}     # what the sandboxes lack, each once, in order
    with ExitStack() as stack:
        for n in FILES:
            lesson = f"lesson{n}"
            given = (files or {}).get(lesson)
            if not given and not course.assignment(lesson).is_dir():
                # An edition built with --lessons holds only some lessons: the others are
                # not the learner's to write, and the baselines stand in, as for a stub.
                digest.update(f"{lesson}:not here".encode())
                notes.append(f"{lesson}: not in this edition: " + ("no goodput or attainment" if n == 5
                                                                    else _baseline(FILES[n].split())))
                continue
            path = Path(given or course.assignment(lesson) / "exercise.py")
            mine = open_lesson(stack, lesson, path)
            digest.update(f"{lesson}:{mine.digest}".encode())
            if mine.note:
                notes.append(mine.note)
            if mine.log is not None:
                logs.append(mine.log)
            if mine.unconfined:
                lacks[mine.unconfined] = None
            if mine.gate:
                qualify, decide = mine.gate
            policy = policy.with_(**mine.decisions)
        note = "your own functions" + (f" ({'; '.join(notes)})" if notes else "")
        yield Core(f"own:{digest.hexdigest()[:16]}:{'|'.join(notes)}", policy, qualify, decide, note,
                   lambda: "; ".join(log.summary() for log in logs if log.failures), "; ".join(lacks))


def _qualifies(sandbox) -> bool:
    """Lesson 5's qualify, asked on one completed record that met its deadlines."""
    from reference.shapes import RequestRecord
    record = RequestRecord("probe", "s", "c", Slo(1.0, 1.0), 0.0, "completed", 16, 2, 2, (0.5, 0.75))
    result = sandbox.call("qualify", record, None)
    return not (result.status == "missing" or result.stub)


def _gate(sandbox, path: Path) -> tuple[Callable, Callable]:
    """The learner's qualify and decide_release, validated as the grader validates them.
    A problem stops the command in one line naming the file and the function."""
    from grader.engine.validate import InvalidValue, read_answer
    from reference.shapes import QUALIFICATIONS, RELEASE_DECISIONS, ReleaseDecision
    from grader.engine.errors import InputError
    from grader.engine.text import one_line

    def qualify(record, slo=None):
        result = sandbox.call("qualify", record, slo)
        value = result.value if result.status == "ok" else None
        if type(value) is not str or value not in QUALIFICATIONS:
            # "(True)" alone did not say what was wrong with a verdict returned as a bool.
            why = (result.detail if result.status != "ok" else
                   f"returned {type(value).__name__} {value!r}, not one of {', '.join(QUALIFICATIONS)}")
            raise InputError(f"{path}: qualify", f"gave no verdict for {record.id} ({why}): the "
                             "figures need one per request")
        return value

    def decide(baseline_runs, candidate_runs, rule):
        args = (tuple(baseline_runs), tuple(candidate_runs), rule)
        result = sandbox.call("decide_release", *args)
        if result.status != "ok":
            raise InputError(f"{path}: decide_release", result.detail or result.status)
        try:
            value = read_answer("decide_release", result.value, args, ReleaseDecision)
        except InvalidValue as e:
            raise InputError(f"{path}: decide_release", f"returned something unusable: {e}") from None
        # A decision the course does not have ("yolo") was printed and drawn as one, and its
        # reasons reached the terminal as they were (an escape sequence clears it).
        if value.decision not in RELEASE_DECISIONS:
            raise InputError(f"{path}: decide_release", f"ReleaseDecision.decision: "
                             f"{one_line(repr(value.decision), 60)} is not one of "
                             f"{', '.join(RELEASE_DECISIONS)}")
        return ReleaseDecision(value.decision, tuple(one_line(r, 300) for r in value.reasons))
    return qualify, decide
