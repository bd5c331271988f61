"""Lesson 6, the incident: a diagnosis and a fixed design sheet, graded on what they demonstrate.

The submission is a folder, not code: ``diagnosis.yaml`` (each root cause: the change, the
mechanism from the lesson's taxonomy, the evidence items cited, the fix as sheet values)
and ``design_sheet.yaml`` (the regressed release's sheet with the fixes, recorded as a new
release with a rollback rule). Nothing of the learner's runs, so there is no sandbox, but
the folder is hostile input all the same: files are read as bounded bytes, parsed without
YAML aliases, validated against rubrics/diagnosis.schema.json and the design-sheet schema,
and every problem is feedback on the criterion it affects.

Cases: ``grader check`` grades against a public practice incident (the one the diagnosis
names; assignments/lesson6/public/practice.yaml, bundles in assignments/lesson6/practice/),
never the demo, which the README works through; ``grader grade`` against the student's own
incident, drawn from the instructor secret and the student's id (the hidden case carries a
key derived from the secret, never the secret).

Criteria (rubrics/lesson6.yaml):
- causes found (recall) and causes named rightly (precision): a cause counts only when it
  names a change at fault, that change's own mechanism, and cites evidence items of the
  bundle at least half of which show it. A claim with no support (or mostly none), or the
  wrong mechanism for a true cause, earns nothing.
- evidence: each claim of a change at fault names that change's mechanism and cites only
  items that exist and show it.

Feedback never gives the answer away (resubmitting must not become an oracle): it says
what the bundle shows against a claim as stated (an item that does not exist, or does not
show the mechanism named; evidence that shows a mechanism but nothing that ties it to the
change), in the same words whether the change is harmless or its mechanism is another,
and precision as a count.
- replay: with a cause found (nothing found, nothing to replay: the bundle's R41 sheet ships
  against R42 whatever the diagnosis), the fixed sheet carries every stated fix, each found
  cause's fix changes what R42 runs (a fix that restates it is none) and sets more than
  values other changes set (their fix), and replayed on the incident's replay seeds, with
  every value a change at fault set run as R42 has it unless the fix stated for that
  change sets it (the bundle's R41 sheet reverts every change), it ships against the
  regressed release under
  lesson 5's rule, with no class regressing against the last good release and no
  violation above its count.
- rollback: the new release states a rollback rule: back to the last good release, on a
  condition this incident meets under the release's own rule (its thresholds), with a gate
  that judges every token's deadline.
"""
from __future__ import annotations

import copy
import unicodedata
from dataclasses import dataclass
from typing import Any, Optional

from grader.engine.cases import Case
from grader.engine.checks import CheckContext, Measure, check, not_checked_here
from grader.engine.oracle import OracleMissing
from grader.course.incident import (NEXT, PREVIOUS, RELEASE, Incident, fix_neighbourhood, incidents_key,
                                    judge_fix, practice_incidents, regression, set_path, student_incident)
from grader.course.sheet import (POLICY_SECTIONS, WHOLE_FILE, Problem, get_path, policy_sheet, read_yaml,
                                 schema_of, schema_path, schema_problems, short, validate_sheet, with_lines)
from grader.course.trials import rule_from
from reference.yaml_words import got, kind

SUBMISSION = "folder"
FILES = ("diagnosis.yaml", "design_sheet.yaml")
# The public incidents are made of the reference's runs: recorded in the learner edition.
PUBLIC_CASES_NEED = ("lesson1", "lesson2", "lesson3", "lesson4", "lesson5")
SHOWN = 3            # problems a feedback line lists


# ---- the folder -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Handed:
    """What the learner handed in, parsed; a file with problems has no data."""
    diagnosis: Optional[dict]
    diagnosis_problems: tuple[Problem, ...]
    sheet: Optional[dict]
    sheet_problems: tuple[Problem, ...]
    student: str
    notes: tuple[str, ...] = ()


def _read(files: dict, name: str, validate, notes=()) -> tuple[Any, tuple[Problem, ...]]:
    if name not in files:
        # The loader's note on a file it would not read ("diagnosis.yaml is a folder, not a
        # file", "... is a symbolic link: not read") is why it is missing: "there is no
        # diagnosis.yaml" beside one read as a contradiction.
        why = next((n for n in notes if n.startswith(f"{name} ")), "")
        return None, (Problem(WHOLE_FILE, why or f"there is no {name} in your folder"),)
    data, problems = read_yaml(files[name])
    if not problems and data is None:
        problems = [Problem(WHOLE_FILE, f"{name} is empty")]
    if not problems:
        problems = with_lines(files[name], validate(data))
    return (None, tuple(problems)) if problems else (data, ())


def _flow(value) -> str:
    """A value as YAML's flow style writes it: consume, 0.1, true, {inactive_hits: consume}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) and value and len(value) <= 60 else short(value)


def _diagnosis_problems(data, schema) -> list[Problem]:
    """The schema's problems, with a fix's keys that are not sections said as such. changes.yaml
    writes a change as paths, and a fix written so (admission_ledger.inactive_hits: consume)
    was told "causes[0].fix: expected one of request_contract, ...; got a string
    'admission_ledger.inactive_hits'" and "causes[0].fix.admission_ledger.inactive_hits:
    expected a mapping", a place the file does not have."""
    problems = schema_problems(data, schema)
    causes = data.get("causes") if isinstance(data, dict) else None
    if not isinstance(causes, list):
        return problems
    sections = schema_sections(schema)
    said, told, inside = [], set(), set()      # our lines; the schema's words they replace
    for n, cause in enumerate(causes):
        fix = cause.get("fix") if isinstance(cause, dict) else None
        if not isinstance(fix, dict):
            continue
        where = f"causes[{n}].fix"
        for key, value in fix.items():
            if key in sections:
                continue
            first, _, rest = key.partition(".") if isinstance(key, str) else ("", "", "")
            if first in sections and rest:
                nested = value
                for part in reversed(rest.split(".")):
                    nested = {part: nested}
                said.append(Problem(where, f"{short(key)} is a path: a fix is written as nested keys, "
                                           f"{first}: {_flow(nested)}"))
            else:
                said.append(Problem(where, f"{short(key)} is not a section a fix may set: a fix's keys "
                                           f"are {', '.join(sections)}"))
            told.add((where, got(key)))                    # the key, against the sections' enum
            inside.add(f"{where}.{key}")                   # what its value was held to
    if not said:
        return problems

    def replaced(p: Problem) -> bool:
        # Each problem against sets, never against every key (a file of thousands of keys).
        if (p.path, p.message.rpartition("; got ")[2]) in told:
            return True
        return any(p.path[:i] in inside for i, ch in enumerate(p.path) if ch == ".") or p.path in inside
    kept = [p for p in problems if not replaced(p)]
    return said + kept


def schema_sections(schema) -> tuple[str, ...]:
    """The keys a fix may have, as the diagnosis schema lists them."""
    spec = schema_of(schema)
    return tuple(spec["properties"]["causes"]["items"]["properties"]["fix"]["propertyNames"]["enum"])


def parse_submission(submission, course) -> Handed:
    files = dict(submission.files)
    notes = submission.notes
    diagnosis, dp = _read(files, "diagnosis.yaml",
                          lambda d: _diagnosis_problems(d, schema_path(course, "diagnosis.schema.json")), notes)
    sheet, sp = _read(files, "design_sheet.yaml", lambda d: validate_sheet(d, course), notes)
    return Handed(diagnosis, dp, sheet, sp, submission.student, submission.notes)


def unusable(handed: Handed) -> tuple[str, ...]:
    """Why each file cannot be read, whatever the incident (its YAML, its schema, a file
    missing): said as the criteria say it, and nothing of the incident in it."""
    said = []
    if handed.diagnosis_problems:
        said.append(_problems("diagnosis.yaml", handed.diagnosis_problems))
    if handed.sheet_problems:
        said.append(_sheet_unusable(handed.sheet_problems))
    return tuple(said)


def _problems(name: str, problems) -> str:
    shown = "; ".join(str(p) for p in problems[:SHOWN])
    more = f" (and {len(problems) - SHOWN} more)" if len(problems) > SHOWN else ""
    return f"{name} is not usable: {shown}{more}"


# ---- the cases --------------------------------------------------------------------------------
@dataclass(frozen=True)
class StudentIncidents:
    """The hidden case: each student's incident is drawn from this key and their id."""
    key: str


def record_more(course) -> None:
    """What the learner edition records beyond grading the known submissions: each public
    incident's sealed evidence (the known submissions diagnose p1 only, and a diagnosis of
    another practice incident that names a cause is judged on its evidence), the verdict
    of every fix of a public incident that reverts some of its changes and keeps the rest,
    and the rollback conditions R42 meets under each release rule of the incident."""
    for case in public_cases(course):
        case.inputs.evidence()
        for sheet in fix_neighbourhood(case.inputs):
            judge_fix(case.inputs, sheet)
        # A new release keeps the rule of R41 or of R42 (R42 may have changed it harmlessly).
        for sheet in (case.inputs.baseline, case.inputs.release):
            regression(case.inputs, rule_from(sheet["release_criteria"]["rule"], "release_criteria.rule"))


def public_cases(course) -> list[Case]:
    # Sealed: the learner edition records these cases, and no file of it may read as their answer.
    return [Case("incident", i.id, "public", i.sealed(), f"practice incident {i.id}")
            for i in practice_incidents(course)]


def hidden_cases(secret: bytes, course=None) -> list[Case]:
    return [Case("incident", "your-incident", "hidden", StudentIncidents(incidents_key(secret)),
                 "your own incident")]


def _incident(ctx: CheckContext) -> Incident:
    """The student's own incident when grading, else the practice incident the diagnosis
    names (the first one when it names none of them)."""
    if "incident" not in ctx.memo:
        hidden = [c for c in ctx.cases if c.visibility == "hidden"]
        if hidden:
            ctx.memo["incident"] = student_incident(ctx.course, hidden[0].inputs.key,
                                                    ctx.submission.student or "anonymous")
        else:
            practice = [c.inputs for c in ctx.cases if c.family == "incident"]
            said = (ctx.submission.diagnosis or {}).get("incident")
            ctx.memo["incident"] = next((i for i in practice if same_incident_id(i.id, said)), practice[0])
    return ctx.memo["incident"]


# ---- judging the claims ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Claim:
    n: int                      # its place in the diagnosis (1-based)
    change: str
    mechanism: str
    cited: tuple[str, ...]
    fix: dict
    known: bool                 # the change is one of the release's
    at_fault: bool              # ... and one of its faults
    demonstrated: bool          # at fault, its own mechanism, and some cited item that shows it
    sound: bool                 # demonstrated, and every cited item exists and shows the mechanism
    why: str                    # what the bundle shows against the claim as stated ("" when sound);
                                # the same words for a harmless change and for another mechanism


def _judge(incident: Incident, cause: dict, n: int) -> Claim:
    changes = {c.id: c for c in incident.changes}
    items = {i.id: i for i in incident.evidence()}
    change, mechanism = cause["change"], cause["mechanism"]
    cited = tuple(cause["evidence"])
    fault = changes.get(change)
    showing = [e for e in cited if e in items and items[e].shows(mechanism)]
    # Evidence selects: at least half of what a claim cites must show its mechanism. Citing
    # every item of the index made "some cited item shows it" true of any claim: every
    # change named with each mechanism its section allows, each citing all the evidence,
    # found every root cause and kept 6 of 10 without reading one item. A stray item beside
    # a right one (half) is the evidence criterion's to charge, not recall's.
    selected = bool(showing) and 2 * len(showing) >= len(cited)
    at_fault = bool(fault and fault.mechanism)
    demonstrated = at_fault and mechanism == fault.mechanism and selected
    reasons = []
    if fault is None:
        reasons.append(f"there is no change {change} in {RELEASE} (it has {', '.join(changes)})")
    if not cited:
        reasons.append("it cites no evidence")
    # Each item that is absent or shows nothing, up to SHOWN of each, then the rest by id: a
    # claim citing the whole index read as nineteen sentences, some 7,000 characters.
    absent = [e for e in cited if e not in items]
    blank = [e for e in cited if e in items and not items[e].shows(mechanism)]
    for e in cited:
        if e in absent[:SHOWN]:
            reasons.append(f"{e} is not in the evidence index (E1..E{len(items)})")
        elif e in blank[:SHOWN]:
            rows = f"{items[e].count} row{'' if items[e].count == 1 else 's'}"
            reasons.append(f"the evidence you cite for {change}, {e} ({items[e].select}, {rows}), "
                           f"does not show {mechanism}")
    if absent[SHOWN:]:
        reasons.append(f"nor are {len(absent) - SHOWN} more items you cite for {change} in the index "
                       f"({', '.join(absent[SHOWN:])})")
    if blank[SHOWN:]:
        reasons.append(f"nor do {len(blank) - SHOWN} more items you cite for {change} show {mechanism} "
                       f"({', '.join(blank[SHOWN:])})")
    if showing and not selected:
        # Said of every claim alike, harmless or not: it names no answer. First, before the
        # items one by one (a claim citing them all lists every one).
        reasons.insert(1 if fault is None else 0,
                       f"only {len(showing)} of the {len(cited)} items you cite for {change} show "
                       f"{mechanism}: evidence is the items that show the mechanism, and a claim whose "
                       "citations mostly do not is not demonstrated")
    elif fault is not None and showing and not demonstrated:
        # A harmless change, or a true cause with another mechanism: one sentence for both.
        # Named, so that beside an item that shows nothing the sentence does not read as a
        # contradiction ("E8 does not show it; what you cite shows it").
        named = showing[0] if len(showing) == 1 else f"{', '.join(showing[:-1])} and {showing[-1]}"
        reasons.append(f"{named} {'shows' if len(showing) == 1 else 'show'} {mechanism}, "
                       f"but nothing in {'it' if len(showing) == 1 else 'them'} ties {mechanism} to {change}")
    return Claim(n, change, mechanism, cited, cause["fix"], fault is not None, at_fault, demonstrated,
                 demonstrated and not reasons, "; ".join(reasons))


def _claims(ctx: CheckContext) -> tuple[list[Claim], str]:
    """(claims, why there are none to judge)."""
    handed: Handed = ctx.submission
    if handed.diagnosis is None:
        return [], _problems("diagnosis.yaml", handed.diagnosis_problems)
    incident = _incident(ctx)
    causes = handed.diagnosis["causes"]
    if not causes:
        return [], "nothing diagnosed yet: diagnosis.yaml lists no causes"
    return [_judge(incident, c, n + 1) for n, c in enumerate(causes)], ""


def same_incident_id(graded: str, said) -> bool:
    """An incident id as a person might type it: 'P2', ' p2 ', a full-width 'ｐ2' name p2
    (grading p1 instead, with every item read against the wrong bundle, cost a right
    diagnosis of p2 nine points)."""
    if not isinstance(said, str):
        return False
    return unicodedata.normalize("NFKC", said).strip().casefold() == graded.casefold()


def _elsewhere(ctx: CheckContext) -> str:
    """What the feedback says first when the diagnosis names another incident than the one
    graded: every verdict after it is about the graded incident's evidence, and a learner
    who reads them as about their own would chase the wrong items."""
    handed: Handed = ctx.submission
    said = (handed.diagnosis or {}).get("incident")
    graded = _incident(ctx).id
    if said is None or same_incident_id(graded, said):
        return ""
    if any(c.visibility == "hidden" for c in ctx.cases):
        where = f"your own incident {graded!r} (the id in your bundle's incident.yaml) is graded"
    else:
        practice = ", ".join(c.inputs.id for c in ctx.cases if c.family == "incident")
        where = (f"this check grades the practice incidents ({practice}), so {graded!r} is graded; "
                 "the demo is the README's worked example")
    return f"your diagnosis names incident {said!r}, but {where}. Judged against {graded!r}: "


@check("lesson6.causes_found")
def causes_found(ctx: CheckContext, params: dict) -> Measure:
    claims, none = _claims(ctx)
    if none:
        return Measure(0.0, none)
    incident = _incident(ctx)
    faults = incident.faults
    found = {c.change for c in claims if c.demonstrated}
    # A change at fault has one mechanism: one named with several is a guess among them, and
    # counts as that share of a cause found. Counted whole, every change named with every
    # mechanism its section allows, each citing items that show it, kept 7 of 10.
    named: dict[str, set] = {}
    for c in claims:
        named.setdefault(c.change, set()).add(c.mechanism)
    hedged = sorted(change for change in found if len(named[change]) > 1)
    credit = sum(1 / len(named[change]) for change in found)
    if len(found) == len(faults) and not hedged:
        return Measure(1.0, f"all {len(faults)} root causes found, each with evidence")
    parts = [f"your claim of {c.change} ({c.mechanism}) earns nothing: {c.why}"
             for c in claims if not c.demonstrated][:SHOWN]
    parts += [f"{change} is named with {len(named[change])} mechanisms and a root cause has one, so it "
              f"counts 1/{len(named[change])}: name the one its evidence shows" for change in hedged][:SHOWN]
    left = len(faults) - len(found)
    if left:
        parts.append(f"{left} root cause{'s are' if left > 1 else ' is'} not demonstrated yet; every report "
                     f"in symptoms.md follows from some root cause")
    return Measure(credit / len(faults),
                   _elsewhere(ctx) + f"{len(found)} of {len(faults)} root causes found; " + "; ".join(parts),
                   tuple(sorted(found)))


@check("lesson6.causes_precision")
def causes_precision(ctx: CheckContext, params: dict) -> Measure:
    claims, none = _claims(ctx)
    if none:
        return Measure(0.0, none)
    # A cause is a change with a mechanism: one change named with two mechanisms is two
    # claims, and the hedge is a wrong one, as the wrong mechanism alone would be.
    named = sorted({(c.change, c.mechanism) for c in claims})
    right = {(c.change, c.mechanism) for c in claims if c.demonstrated}
    wrong = [n for n in named if n not in right]
    if not wrong:
        return Measure(1.0, "every cause you named is a root cause with its mechanism, with evidence")
    # A count, never which: naming the harmless changes would answer the question.
    unknown = [f"{c.change}: {c.why}" for c in claims if not c.known]
    return Measure(len(right) / len(named),
                   _elsewhere(ctx) + f"{len(right)} of the {len(named)} causes (a change with a mechanism) "
                   f"you named {'is a demonstrated root cause' if len(right) == 1 else 'are demonstrated root causes'}"
                   + (f" ({'; '.join(unknown[:SHOWN])})" if unknown else ""),
                   (f"{len(wrong)} of {len(named)}",))


@check("lesson6.evidence")
def evidence(ctx: CheckContext, params: dict) -> Measure:
    claims, none = _claims(ctx)
    if none:
        return Measure(0.0, none)
    # A cause is a change with a mechanism, as precision counts it: one stated again is the
    # same cause, and it is sound only when every statement of it is. Counted per statement,
    # a right cause stated seventeen more times thinned a stray item beside another cause
    # from 1 of 3 causes to 1 of 20 (1.33 -> 1.9 of 2).
    named = {(c.change, c.mechanism) for c in claims}
    judged = {(c.change, c.mechanism) for c in claims if c.at_fault}
    if not any(c.demonstrated for c in claims):
        return Measure(0.0, _elsewhere(ctx) + "no cause of yours is demonstrated, so no evidence can be credited")
    unsound = {(c.change, c.mechanism) for c in claims if c.at_fault and not c.sound}
    if not unsound:
        return Measure(1.0, "every cause names its mechanism and cites evidence that shows it")
    # Said of every claim the bundle speaks against, harmless or not, so which claims are
    # judged (the changes at fault) does not show.
    said = [c for c in claims if c.why]
    first = said[0]
    against = len({(c.change, c.mechanism) for c in said})
    return Measure((len(judged) - len(unsound)) / len(judged),
                   _elsewhere(ctx) + f"{against} of your {len(named)} causes {'is' if against == 1 else 'are'} "
                   f"not supported as stated; cause "
                   f"{first.n} ({first.change}, {first.mechanism}): {first.why}",
                   tuple(f"cause {c.n}" for c in said))


# ---- the fixed sheet ----------------------------------------------------------------------------
def _sheet_unusable(problems) -> str:
    if problems and problems[0].message.endswith("is empty"):
        return (f"design_sheet.yaml is empty: start from your bundle's sheets/{RELEASE}.yaml, "
                f"apply your fixes and record them as release {NEXT}")
    return _problems("design_sheet.yaml", problems)


def _sheet(ctx: CheckContext) -> tuple[Optional[dict], str]:
    handed: Handed = ctx.submission
    if handed.sheet is None:
        return None, _sheet_unusable(handed.sheet_problems)
    missing = [s for s in (*POLICY_SECTIONS, "release_criteria", "change_record") if s not in handed.sheet]
    if missing:
        return None, (f"design_sheet.yaml is not a whole release: it has no {', '.join(missing)} "
                      f"(start from your bundle's sheets/{RELEASE}.yaml)")
    return handed.sheet, ""


def _leaves(fix: dict, prefix: str = ""):
    for k, v in fix.items():
        path = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            yield from _leaves(v, path)
        else:
            yield path, v


_ABSENT = object()


def _holds(sheet, path: str, value) -> bool:
    """Whether the sheet has exactly ``value`` at ``path``: there, equal, and a bool where the
    value is one (True == 1 in Python, not in a design sheet)."""
    have = get_path(sheet, path, _ABSENT)
    return have is not _ABSENT and have == value and isinstance(have, bool) == isinstance(value, bool)


def _unlike(path: str, value, have) -> str:
    """'{path}: 512, but design_sheet.yaml has 1024', in YAML's words where the two are of
    other kinds (a string '1e-1' beside the number 0.1, 'true' beside true) or the sheet has
    no such key (not a value that reads as if the sheet held the words)."""
    def said(v) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else short(v)

    def what(v) -> str:
        return f"{kind(v)} {said(v)}" if isinstance(v, bool) else got(v)
    if have is _ABSENT:
        return f"{path}: {said(value)}, but design_sheet.yaml has no {path}"
    if kind(have) != kind(value):
        return f"{path}: {what(value)}, but design_sheet.yaml has {what(have)}"
    return f"{path}: {said(value)}, but design_sheet.yaml has {said(have)}"


def _applied(release, fix: dict):
    """The regressed release with one fix applied, or None where the fix has a place the
    release has no room for (not a value it runs already)."""
    fixed = copy.deepcopy(dict(release))
    for path, value in _leaves(fix):
        try:
            set_path(fixed, path, value)
        except (LookupError, ValueError, TypeError):
            return None
    return fixed


def _fix_problem(incident: Incident, cause: dict) -> str:
    """Why a found cause's fix is not the fix of that cause ("" when it may be): every value it
    moves is one another change of the release set (the fix of that change, stated under
    another cause: the union of the fixes can be right while no cause's own fix is), or it
    leaves the release running as it did (a restated value, words, the gate, a knob no rule
    reads). A fix that also moves a value of its own change, or one no change set (another
    chunk rule for a chunk fault, say), may be a fix of its own. Said of every change alike,
    harmless or at fault: the changes' diffs are the bundle's."""
    release = incident.release
    owner = {path: c.id for c in incident.changes if c.id != cause["change"] for path, _, _ in c.diff}
    moved = [path for path, value in _leaves(cause["fix"]) if not _holds(release, path, value)]
    if moved and all(path in owner for path in moved):
        return (f"your fix of {cause['change']} sets only what other changes of {RELEASE} set ({moved[0]}, "
                f"which {owner[moved[0]]} changed), nothing of {cause['change']}'s own: state each change's "
                "fix under the cause it fixes")
    fixed = _applied(release, cause["fix"])
    if fixed is not None and policy_sheet(fixed) == policy_sheet(release):
        return (f"your fix of {cause['change']} leaves {RELEASE} running as it did ({RELEASE} with it "
                f"replays as {RELEASE}): state it as the design-sheet values that change what the "
                "service runs")
    return ""


def _as_stated(incident: Incident, sheet: dict, causes) -> dict:
    """The sheet as the replay judges it: every value a change at fault set runs as the
    regressed release has it, whatever the sheet says, unless a fix the diagnosis states for
    that change sets it (the sheet carries every stated fix, so that is the sheet's value).
    The replay judges the fixes the diagnosis states for its causes: the bundle's last good
    sheet reverts every change, and beside one cause named of three it replayed as a fix of
    all three (8 of 10), as it did beside that one cause's fix reverting all three, or a
    found cause's fix of no consequence for its fault. A cause named with another mechanism
    or too little evidence costs the cause criteria; its fix is still stated, and replayed.
    The sheet's other changes (a harmless change reverted, another knob) are replayed as the
    sheet has them."""
    stated = {(cause["change"], path) for cause in causes for path, _ in _leaves(cause["fix"])}
    replayed = copy.deepcopy(dict(sheet))
    for change in incident.faults:
        for path, _, _ in change.diff:
            if (change.id, path) not in stated:
                set_path(replayed, path, copy.deepcopy(get_path(incident.release, path)))
    return replayed


@check("lesson6.replay")
def replay_fix(ctx: CheckContext, params: dict) -> Measure:
    sheet, why = _sheet(ctx)
    if sheet is None:
        return Measure(0.0, why)
    handed: Handed = ctx.submission
    # Nothing found, nothing shown: the replay judges the fix of a cause the diagnosis
    # demonstrates. The bundle ships R41's own sheet, and R41 ships against R42: handed in
    # beside no diagnosis, an unreadable one, or causes that all earn nothing (a harmless
    # change's revert stated as the fix), it replayed as a fix of nothing found (README: no
    # evidence, no credit, however right the guess). Gating on a cause found, rather than
    # on a change at fault, says nothing causes-found does not already say.
    claims, none = _claims(ctx)
    if none:
        if handed.diagnosis is not None:
            return Measure(0.0, "your diagnosis states no fix (each cause's fix: its design-sheet values): "
                                "the replay judges the fix of the causes you found, and there is none yet")
        return Measure(0.0, f"{none}: the replay judges the fix of the causes your diagnosis finds")
    if not any(c.demonstrated for c in claims):
        return Measure(0.0, _elsewhere(ctx) + "no cause of yours is demonstrated (causes-found says why), so "
                            "no fix of a cause found can be replayed: the replay judges the fix of the causes "
                            "you found, and there is none yet")
    for cause in handed.diagnosis["causes"]:
        for path, value in _leaves(cause["fix"]):
            if not _holds(sheet, path, value):
                unlike = _unlike(path, value, get_path(sheet, path, _ABSENT))
                return Measure(0.0, f"your diagnosis fixes {cause['change']} with {unlike}: "
                                    "the sheet you ship must carry your fixes")
    incident = _incident(ctx)
    found = [cause for cause, claim in zip(handed.diagnosis["causes"], claims) if claim.demonstrated]
    # Each found cause's own fix, one by one: beside a sheet that fixes everything (the
    # bundle's R41 sheet), fixes that restate R42's values, revert a knob the service does
    # not read, or fix another cause's change were each no fix of their cause, and the
    # criterion judged only that one of them changed something.
    wrong = next((why for why in (_fix_problem(incident, cause) for cause in found) if why), "")
    if wrong:
        return Measure(0.0, f"{wrong}; the replay judges the fix of each cause you found")
    try:
        verdict = judge_fix(incident, _as_stated(incident, sheet, handed.diagnosis["causes"]))
    except OracleMissing:
        return not_checked_here(
            "not checked here: this edition replays the fixes made of reverting or keeping each "
            f"change of {RELEASE}, and your sheet changes other knobs; the replay needs the "
            "reference worker's decisions, which your instructor's grade has; replay it yourself: "
            f"grader sheet run design_sheet.yaml --baseline <your bundle>/sheets/{RELEASE}.yaml")
    seeds = ", ".join(map(str, incident.replay_seeds)) if not any(
        c.visibility == "hidden" for c in ctx.cases) else f"{len(incident.replay_seeds)} hidden seeds"
    if verdict.passed:
        return Measure(1.0, f"replayed on {seeds}: {verdict.decision.decision} against {RELEASE} "
                            f"({verdict.decision.reasons[0]}), no class regression and no new violation "
                            f"against {PREVIOUS}")
    # Said of every sheet that does not fix the release, never only where a value was put
    # back: that would say which of the sheet's changes undo a change at fault.
    return Measure(0.0, f"replayed on {seeds}, your sheet does not fix the release (the replay judges "
                        f"the fixes your diagnosis states: a value a change at fault set runs as {RELEASE} "
                        f"has it unless the fix you state for that change sets it, whatever the rest of your "
                        f"sheet says): "
                        + "; ".join(verdict.problems[:SHOWN]))


@check("lesson6.rollback")
def rollback(ctx: CheckContext, params: dict) -> Measure:
    sheet, why = _sheet(ctx)
    if sheet is None:
        return Measure(0.0, why)
    record = sheet["change_record"]
    last = record[-1] if record else {}
    if not record or last["release"] in (PREVIOUS, RELEASE):
        earlier = [entry["release"] for entry in record if entry["release"] not in (PREVIOUS, RELEASE)]
        if earlier:
            # The README's example of an entry opens the list, so a release recorded first
            # (newest on top) read as "no release after R42" to someone who had written one.
            return Measure(0.0, f"your change record lists {earlier[-1]} before {last['release']}: the "
                                f"record runs oldest first, so your release comes after {RELEASE}, as "
                                "its last entry")
        return Measure(0.0, f"the change record has no release after {RELEASE}: record your fixes as "
                            f"release {NEXT}, with its rollback rule")
    rule = last.get("rollback")
    if not rule:
        return Measure(0.0, f"release {last['release']} states no rollback rule (rollback: to, when)")
    if rule["to"] != PREVIOUS:
        bad = "the release that regressed" if rule["to"] == RELEASE else "not the last good release"
        return Measure(0.0, f"release {last['release']} rolls back to {rule['to']}, {bad}; the last good "
                            f"release is {PREVIOUS}")
    # The conditions are judged under the thresholds the new release states
    # (release_criteria.rule): "roll back on class_drop" beside max_class_drop: 1.0 is a rule
    # that never fires, whatever R42 did.
    incident = _incident(ctx)
    own = rule_from(sheet["release_criteria"]["rule"], "design_sheet.yaml: release_criteria.rule")
    try:
        fired = regression(incident, own)
    except OracleMissing:
        return not_checked_here(
            "not checked here: this edition judges the rollback conditions under the release rules of "
            f"{PREVIOUS} and {RELEASE}, and your release_criteria.rule is another; the replays it needs "
            "are the reference worker's, which your instructor's grade has")
    if not any(fired.get(w) for w in rule["when"]):
        met = ", ".join(k for k, v in fired.items() if v) or "none"
        under = "" if own == incident.rule else " under the thresholds of your release_criteria.rule"
        return Measure(0.0, f"your rollback conditions ({', '.join(rule['when'])}) would not have rolled "
                            f"{RELEASE} back{under}; {'under them ' if under else ''}this incident meets: {met}")
    if get_path(sheet, "release_criteria.qualification.token_deadline") != "largest_gap":
        return Measure(0.0, "your release gate judges token deadlines by the average time per token, "
                            "which hides stalls: a rollback rule on it cannot see them (token_deadline: "
                            "largest_gap)")
    return Measure(1.0, f"release {last['release']} rolls back to {PREVIOUS} when "
                        f"{', '.join(rule['when'])}; {RELEASE} met "
                        f"{', '.join(k for k, v in fired.items() if v)}")

