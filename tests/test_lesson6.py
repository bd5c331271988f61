"""Lesson 6: the incident. Reference diagnoses get full marks (the practice incidents', the
demo's and every fault combination's); each wrong diagnosis loses exactly on the criterion
that names its mistake; feedback never gives the answer away; hostile folders are feedback,
never a crash; incidents are per student and deterministic."""
import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, SECRET, SUBMISSIONS, full, grade, other_than, scores
from grader.instructor.batch import run_batch
from grader.course.bundle import symptoms, write_answer, write_bundle
from grader.engine.cases import Case
from grader.cli import main
from grader.engine.layout import find_course
from grader.engine.errors import InputError
from grader.instructor.gradebook import open_gradebook
from grader.course.incident import (MECHANISMS, combinations, demo_incident, draw, incidents_key,
                                    nested, practice_incidents, reference_diagnosis, reference_sheet,
                                    set_path, settled, student_incident)
from grader.engine.pipeline import grade_path, grade_submission
from grader.course.sheet import policy_sheet
from grader.lessons.oracles.incident_catalogue import FAULTS
from grader.engine.submission import load_submission
from grader.course.trials import Design, run_design

COURSE = find_course(str(ROOT))
REFERENCE = ROOT / "reference" / "solutions" / "lesson6"
STUB = ROOT / "assignments" / "lesson6" / "submission"
WRONG = SUBMISSIONS / "lesson6"
FILES = ("diagnosis.yaml", "design_sheet.yaml")
ALL = {"causes-found": 3, "causes-precision": 2, "evidence": 2, "fix-replayed": 2, "rollback-rule": 1}


@pytest.fixture(scope="module")
def demo():
    return demo_incident(COURSE)


@pytest.fixture(scope="module")
def practice():
    return {i.id: i for i in practice_incidents(COURSE)}


def lost(report) -> dict:
    return {k: round(v - scores(report)[k], 4) for k, v in full(report).items() if scores(report)[k] != v}


def grade_on(incident, path: Path):
    """A diagnosis graded on one given incident (the demo's wrong diagnoses, a combination)."""
    return grade_submission("lesson6", load_submission(path, FILES), COURSE, mode="check",
                            cases=[Case("incident", incident.id, "public", incident)])


# ---- the reference and the stub ----------------------------------------------------------
def test_reference_diagnosis_of_the_practice_incident_gets_full_marks():
    report = grade("lesson6", REFERENCE)
    assert full(report) == ALL and scores(report) == ALL, [c.feedback for c in report.criteria]
    assert report.isolation.startswith("none needed")
    assert {c["name"] for c in report.cases} == {"p1", "p2"}         # the practice, not the demo


def test_the_stub_gets_nothing_with_a_clear_line():
    report = grade("lesson6", STUB)
    assert report.score == 0
    feedback = {c.id: c.feedback for c in report.criteria}
    assert all(feedback[k] == "nothing diagnosed yet: diagnosis.yaml lists no causes"
               for k in ("causes-found", "causes-precision", "evidence"))
    assert feedback["fix-replayed"].startswith("design_sheet.yaml is empty: start from your bundle's sheets/R42.yaml")


def test_the_reference_folder_is_the_first_practice_incidents_reference_answer(practice):
    first = practice["p1"]
    diagnosis = yaml.safe_load((REFERENCE / "diagnosis.yaml").read_text())
    want = reference_diagnosis(first)
    assert [{k: c[k] for k in ("change", "mechanism", "fix")} for c in diagnosis["causes"]] == \
           [{k: c[k] for k in ("change", "mechanism", "fix")} for c in want["causes"]]
    assert [sorted(c["evidence"]) for c in diagnosis["causes"]] == [sorted(c["evidence"]) for c in want["causes"]]
    sheet = yaml.safe_load((REFERENCE / "design_sheet.yaml").read_text())
    assert policy_sheet(sheet) == policy_sheet(reference_sheet(first))


def test_the_demo_s_reference_answer_still_gets_full_marks(demo, tmp_path):
    """The demo stays a worked example (the README's): its answer is full marks on it."""
    answer = write_answer(demo, tmp_path / "demo-answer")
    assert scores(grade_on(demo, answer)) == ALL


def test_check_grades_the_practice_incident_the_diagnosis_names(practice, tmp_path):
    answer = write_answer(practice["p2"], tmp_path / "p2")
    assert scores(grade("lesson6", answer)) == ALL
    # p1's answer relabelled as p2's is graded on p2, and says so.
    relabelled = tmp_path / "relabelled"
    shutil.copytree(REFERENCE, relabelled)
    text = (relabelled / "diagnosis.yaml").read_text().replace("incident: p1", "incident: p2")
    (relabelled / "diagnosis.yaml").write_text(text)
    report = grade("lesson6", relabelled)
    assert report.score < 10
    # A diagnosis that names no practice incident (the demo's) is graded on the first.
    demo_answer = grade("lesson6", WRONG / "alt_correct")
    judged = [c for c in demo_answer.criteria if c.id in ("causes-found", "causes-precision", "evidence")]
    practice = ", ".join(i.id for i in practice_incidents(COURSE))
    # Said first, before verdicts about another incident's evidence.
    assert judged and all(c.score == c.max_score or c.feedback.startswith(
        f"your diagnosis names incident 'demo', but this check grades the practice incidents "
        f"({practice}), so 'p1' is graded; the demo is the README's worked example. Judged against 'p1': ")
        for c in judged), [c.feedback for c in judged]
    assert any(c.score < c.max_score for c in judged)


# ---- wrong diagnoses lose exactly where they are wrong -------------------------------------
EXPECTED_LOSS = {
    "alt_correct": {},
    "alt_minimal": {},
    "absent_evidence": {"evidence": 1.0},
    "irrelevant_evidence": {"evidence": 2.0},
    # No cause found, so no fix of a cause found to replay, however right the guess.
    "unsupported_claims": {"causes-found": 3.0, "causes-precision": 2.0, "evidence": 2.0, "fix-replayed": 2.0},
    # The wrong mechanism for a true cause earns no cause credit, and its evidence credit.
    "wrong_mechanism": {"causes-found": 1.5, "causes-precision": 1.6667, "evidence": 1.0},
    "guess_all": {"causes-precision": 1.6667},
    # Each true cause named twice, with its own mechanism and another: 2 of 4 causes right,
    # and each a guess between two, half a cause found.
    "hedge_mechanism": {"causes-found": 1.5, "causes-precision": 1.6667, "evidence": 1.0},
    # A cause blamed on a change the release does not have is a wrong claim: 2 of 3 right,
    # (2/3 - 0.4) / 0.6 of the 2 points kept.
    "unknown_change": {"causes-precision": 1.1111},
    # The sheet fixes both, but the replay judges the fix of the causes found: the cause it
    # does not find runs as R42 has it, and its over-commits are violations R41 never had
    # (it kept fix-replayed, 8.5 of 10, where half_fix, naming and fixing the same one, lost it).
    "missed_cause": {"causes-found": 1.5, "fix-replayed": 2.0},
    # The stalls blamed on C4, the harmless chunk change, with C1's own mechanism and
    # evidence: a wrong claim (1 of 2 right keeps (1/2 - 0.4) / 0.6 of precision's 2 points),
    # C1 not found, its 300 ms steps and averaging gate still in the sheet.
    "wrong_change": {"causes-found": 1.5, "causes-precision": 1.6667, "fix-replayed": 2.0,
                     "rollback-rule": 1.0},
    "half_fix": {"causes-found": 1.5, "fix-replayed": 2.0},
    "fix_breaks_reclaim": {"fix-replayed": 2.0},
    "fix_not_in_sheet": {"fix-replayed": 2.0},
    # A fix of the symptom: the gate sees the stalls, the budget that makes them stays.
    "gate_only_fix": {"fix-replayed": 2.0},
    "stale_gate": {"rollback-rule": 1.0},
    "rollback_to_regressed": {"rollback-rule": 1.0},
    "invalid_sheet": {"fix-replayed": 2.0, "rollback-rule": 1.0},
    "invalid_diagnosis": {"causes-found": 3.0, "causes-precision": 2.0, "evidence": 2.0, "fix-replayed": 2.0},
}


# Diagnoses of the first practice incident, graded as `grader check lesson6` grades them.
PRACTICE_LOSS = {
    "practice_alt_correct": {},
    # Every change named with each mechanism its section allows (8 causes), each citing items
    # that show that mechanism, beside R41's sheet: C3 and C5 found as guesses between two
    # (half a cause each, 2 of 3 points; counted whole it kept 7.2 of 10), 3 of 8 causes right.
    "practice_hedge_section": {"causes-found": 1.0, "causes-precision": 2.0, "evidence": 0.8},
}


def test_every_wrong_diagnosis_is_listed():
    assert {p.name for p in WRONG.iterdir() if p.is_dir()} == set(EXPECTED_LOSS) | set(PRACTICE_LOSS)


@pytest.mark.parametrize("name", sorted(PRACTICE_LOSS))
def test_a_diagnosis_of_the_practice_incident_is_graded_by_the_check(name):
    report = grade("lesson6", WRONG / name)
    assert lost(report) == PRACTICE_LOSS[name], {c.id: c.feedback for c in report.criteria}


# The wrong diagnoses are of the demo incident (their ids are the demo bundle's).
@pytest.mark.parametrize("name", sorted(EXPECTED_LOSS))
def test_a_wrong_diagnosis_loses_exactly_on_its_criterion(name, demo):
    report = grade_on(demo, WRONG / name)
    assert lost(report) == EXPECTED_LOSS[name], {c.id: c.feedback for c in report.criteria}


def test_feedback_says_what_is_wrong_and_where(demo):
    fb = lambda name: {c.id: c.feedback for c in grade_on(demo, WRONG / name).criteria}
    assert ("is named with 2 mechanisms and a root cause has one, so it counts 1/2: name the one "
            "its evidence shows") in fb("hedge_mechanism")["causes-found"]
    assert "E42 is not in the evidence index (E1..E19)" in fb("absent_evidence")["evidence"]
    assert fb("absent_evidence")["evidence"].startswith("1 of your 2 causes is not supported as stated")
    assert ("the evidence you cite for C1, E6 (the 20 longest steps without a prefill chunk, 20 rows), "
            "does not show stall_hidden_by_average") in fb("irrelevant_evidence")["evidence"]
    assert "your claim of C1 (stall_hidden_by_average) earns nothing" in fb("unsupported_claims")["causes-found"]
    assert ("E4, E14, E15 and E17 show outstanding_ignored, but nothing in them ties outstanding_ignored "
            "to C3") in fb("wrong_mechanism")["causes-found"]
    assert "2 of the 4 causes (a change with a mechanism) you named are demonstrated root causes" \
        in fb("guess_all")["causes-precision"]
    assert fb("wrong_change")["causes-precision"].startswith(
        "1 of the 2 causes (a change with a mechanism) you named is a demonstrated root cause")
    missed = fb("missed_cause")["causes-found"]
    assert "1 of 2 root causes found" in missed and "1 root cause is not demonstrated yet" in missed
    assert "use_after_free violations on your sheet's runs, 0 on R41's" in fb("fix_breaks_reclaim")["fix-replayed"]
    assert "chunk_rule.fixed_tokens: 512, but design_sheet.yaml has 1024: the sheet you ship must carry your fixes" \
        in fb("fix_not_in_sheet")["fix-replayed"]
    assert "rolls back to R42, the release that regressed" in fb("rollback_to_regressed")["rollback-rule"]
    assert "average time per token" in fb("stale_gate")["rollback-rule"]
    sheet = fb("invalid_sheet")["fix-replayed"]
    for part in ("admission_ledger.outstanding: missing key (required)",
                 "chunk_rule.rule: expected one of budget, per_token_only, fixed; got a string 'budgett'",
                 "request_contract.worker.max_running: expected an integer"):
        assert part in sheet
    diagnosis = fb("invalid_diagnosis")["causes-found"]
    assert "causes[0].mechanism: expected one of inactive_hits_as_free" in diagnosis
    assert "causes[0].evidence: expected a list; got a string 'E7'" in diagnosis


def test_feedback_never_names_the_answer(tmp_path):
    """On a student's own incident, a harmless change and a true cause with another mechanism
    get the same sentence; nothing says which change is harmless or which mechanism is
    wanted, and precision is a count."""
    alice = student_incident(COURSE, incidents_key(SECRET), "alice")
    right = reference_diagnosis(alice)
    fault, harmless = alice.faults[0], next(c for c in alice.changes if not c.fault)
    other = next(m for m in MECHANISMS if m != fault.mechanism
                 and any(m in i.supports for i in alice.evidence()))
    shows = next(i.id for i in alice.evidence() if other in i.supports)
    causes = [dict(c) for c in right["causes"]]
    causes[0] = dict(causes[0], mechanism=other, evidence=[shows])
    keep = nested((path, now) for path, _, now in harmless.diff)       # what the sheet already has
    causes.append({"change": harmless.id, "mechanism": other, "evidence": [shows], "fix": keep})
    folder = tmp_path / "alice"
    folder.mkdir()
    (folder / "diagnosis.yaml").write_text(yaml.safe_dump({"incident": alice.id, "causes": causes}))
    (folder / "design_sheet.yaml").write_text(yaml.safe_dump(reference_sheet(alice)))
    report = grade_path("lesson6", folder, COURSE, mode="grade", secret=SECRET, student="alice")
    text = " ".join(c.feedback for c in report.criteria)
    assert f"nothing in it ties {other} to {fault.id}" in text and f"nothing in it ties {other} to {harmless.id}" in text
    assert "not a root cause" not in text and "is not what" not in text
    assert fault.mechanism not in text and not any(f.fault in text for f in alice.faults)
    precision = next(c.feedback for c in report.criteria if c.id == "causes-precision")
    assert precision.startswith(f"{len(right['causes']) - 1} of the {len(right['causes']) + 1} causes "
                                "(a change with a mechanism) you named")
    assert harmless.id not in precision and fault.id not in precision
    # And the wrong mechanism costs the cause: recall, precision and evidence all drop.
    assert {"causes-found", "causes-precision", "evidence"} <= set(lost(report))


@pytest.mark.parametrize("name", ["p1", "p2"])
def test_the_committed_practice_bundles_are_what_the_generator_writes(name, practice, tmp_path):
    write_bundle(practice[name], tmp_path / name)
    shipped = ROOT / "assignments" / "lesson6" / "practice" / name
    names = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(tmp_path / name) for p in (tmp_path / name).rglob("*") if p.is_file())
    for file in names:
        assert (shipped / file).read_bytes() == (tmp_path / name / file).read_bytes(), file


def test_no_file_works_a_practice_incident_through(practice):
    """The practice answers are nowhere a learner reads: the bundles name no fault, and no
    README or bundle pairs a practice change with its mechanism."""
    learner = [p for p in (ROOT / "assignments").rglob("*") if p.is_file()]
    for incident in practice.values():
        bundle = ROOT / "assignments" / "lesson6" / "practice" / incident.id
        text = "".join(p.read_text() for p in bundle.rglob("*") if p.is_file())
        assert all(c.fault not in text for c in incident.faults)
        for path in learner:
            words = path.read_text(errors="replace")
            if f"incident: {incident.id}" in words and "causes:" in words:
                assert "mechanism:" not in words.split("causes:", 1)[1], path


def test_the_recorded_practice_cases_hold_no_answer_and_judge_the_same(practice):
    """lesson 6's public cases are what the learner edition records: sealed, so neither the
    cases nor their evidence name a mechanism or a fault; read back, they judge as the plain
    incident does (the same mechanism per change, the same items showing each mechanism) and
    keep its identity, so every recorded figure of it is found."""
    from grader.engine import codec
    from grader.lessons import lesson6
    for case in lesson6.public_cases(COURSE):
        plain = practice[case.name]
        recorded = codec.loads(codec.dumps([case.inputs, list(case.inputs.evidence())]))
        text = codec.dumps(recorded)
        assert not [m for m in MECHANISMS if m in text] and not [f for f in FAULTS if f in text]
        sealed, items = recorded
        assert sealed.digest() == plain.digest() and len(sealed.faults) == len(plain.faults) >= 2
        assert [c.mechanism for c in sealed.changes] == [c.mechanism for c in plain.changes]
        for mine, theirs in zip(items, plain.evidence(), strict=True):
            assert mine.id == theirs.id
            assert {m for m in MECHANISMS if mine.shows(m)} == set(theirs.supports)
    # A planted fault: a seal made with another salt reads as no mechanism at all.
    from grader.course.evidence import seal, unseal
    assert unseal(seal("a", "reclaim_never"), MECHANISMS) == "reclaim_never"
    assert unseal(seal("a", "reclaim_never").replace("a:", "b:"), MECHANISMS) == ""


def test_the_check_on_the_sealed_practice_case_charges_a_wrong_mechanism(practice, tmp_path):
    """The check grades the sealed practice case: the reference diagnosis of p1 with one true
    cause given another mechanism its evidence shows loses that cause, and the feedback
    names neither the change's mechanism nor which changes are harmless."""
    p1 = practice["p1"]
    right = yaml.safe_load((REFERENCE / "diagnosis.yaml").read_text())
    fault = next(c for c in p1.faults if c.id == right["causes"][0]["change"])
    other = next(m for m in MECHANISMS if m != fault.mechanism and any(m in i.supports for i in p1.evidence()))
    shows = next(i.id for i in p1.evidence() if other in i.supports)
    right["causes"][0] = dict(right["causes"][0], mechanism=other, evidence=[shows])
    sub = tmp_path / "sub"
    shutil.copytree(REFERENCE, sub)
    (sub / "diagnosis.yaml").write_text(yaml.safe_dump(right))
    report = grade("lesson6", sub)
    assert lost(report)["causes-found"] == 1.0, lost(report)      # 1 of 3 causes
    text = " ".join(c.feedback for c in report.criteria)
    assert f"nothing in it ties {other} to {fault.id}" in text and fault.mechanism not in text


# ---- hostile folders --------------------------------------------------------------------------
def folder(tmp_path, diagnosis=None, sheet=None, name="sub") -> Path:
    d = tmp_path / name
    d.mkdir()
    for file, content in (("diagnosis.yaml", diagnosis), ("design_sheet.yaml", sheet)):
        src = (REFERENCE / file).read_bytes() if content is None else content
        if src is not False:
            (d / file).write_bytes(src if isinstance(src, bytes) else src.encode())
    return d


BOMB = "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nincident: demo\ncauses: []\n"


@pytest.mark.parametrize("diagnosis,needle", [
    (BOMB, "anchors"),
    (b"\x00" * 64, "binary"),
    ("x: " + "y" * (300 * 1024), "more than 262144 bytes, the limit"),
    ("[" * 4000, "nested too deeply"),
    ("", "diagnosis.yaml is empty"),
    ("- just\n- a list\n", "expected a mapping; got a list"),
    ("incident: demo\ncauses:\n  - {change: C1, change: C3}\n", "duplicate key 'change' (first at line 3)"),
    (False, "there is no diagnosis.yaml"),
    # Python's re reads `$` as "before a final newline" too: 'C3\n' was a change id, and the
    # feedback said there is no change C3 in R42 (it has ..., C3, ...).
    ('incident: p1\ncauses:\n- {change: "C3\\n", mechanism: inactive_hits_as_free, evidence: ["E6\\n"],'
     ' fix: {admission_ledger: {inactive_hits: consume}}}\n', "'C3\\n' is not of the expected form"),
], ids=["alias-bomb", "binary", "too-large", "too-deep", "empty", "a-list", "repeated-key", "missing",
        "final-newline"])
def test_a_hostile_diagnosis_is_feedback(tmp_path, diagnosis, needle):
    report = grade("lesson6", folder(tmp_path, diagnosis=diagnosis))
    feedback = {c.id: c.feedback for c in report.criteria}
    assert needle in feedback["causes-found"], feedback["causes-found"]
    assert scores(report)["causes-found"] == 0 and scores(report)["rollback-rule"] == 1
    # Nothing found in a diagnosis that cannot be read: no fix of a cause found to replay.
    assert scores(report)["fix-replayed"] == 0 and needle in feedback["fix-replayed"], feedback["fix-replayed"]


def test_a_linked_file_is_not_followed(tmp_path):
    d = folder(tmp_path, diagnosis=False)
    (tmp_path / "secret").write_text("instructor secret\n")
    (d / "diagnosis.yaml").symlink_to(tmp_path / "secret")
    (d / "notes.txt").write_text("other files are left alone")
    sub = load_submission(d, FILES, "x")
    assert dict(sub.files).keys() == {"design_sheet.yaml"}
    assert any("symbolic link" in n for n in sub.notes) and any("notes.txt" in n for n in sub.notes)
    report = grade("lesson6", d)
    assert "diagnosis.yaml is not usable: diagnosis.yaml is a symbolic link: not read" in report.criteria[0].feedback
    assert "secret" not in json.dumps(report.to_dict())
    # A folder under the file's name is said as a folder, not as a file that is not there.
    shutil.rmtree(d)
    d = folder(tmp_path, diagnosis=False)
    (d / "diagnosis.yaml").mkdir()
    report = grade("lesson6", d)
    assert "diagnosis.yaml is not usable: diagnosis.yaml is a folder, not a file" in report.criteria[0].feedback


def test_non_finite_numbers_and_a_wrong_sheet_shape_are_feedback(tmp_path):
    text = (REFERENCE / "design_sheet.yaml").read_text().replace("gap_budget_s: 0.1\n", "gap_budget_s: .nan\n", 1)
    assert ".nan" in text
    report = grade("lesson6", folder(tmp_path, sheet=text))
    assert "chunk_rule.gap_budget_s: expected a finite number" in report.criteria[3].feedback
    report = grade("lesson6", folder(tmp_path, sheet="chunk_rule: {rule: budget}\n", name="partial"))
    assert "line 1: chunk_rule.gap_budget_s: missing key (required)" in report.criteria[3].feedback


def test_a_folder_is_required_and_a_code_lesson_refuses_one(tmp_path):
    with pytest.raises(InputError, match="is a file; a submission for this lesson is a folder"):
        grade("lesson6", REFERENCE / "diagnosis.yaml")
    # A path that names nothing says so, not only what it should have been.
    with pytest.raises(InputError, match="no such folder: a submission for this lesson is a folder"):
        grade("lesson6", tmp_path / "nowhere")
    with pytest.raises(InputError, match="holds neither diagnosis.yaml nor design_sheet.yaml"):
        grade("lesson6", tmp_path)
    with pytest.raises(InputError, match="is a folder"):
        grade("lesson1", REFERENCE)


def test_the_digest_is_over_the_files_bytes(tmp_path):
    a = load_submission(folder(tmp_path, name="a"), FILES)
    b = load_submission(folder(tmp_path, name="b"), FILES)
    c = load_submission(folder(tmp_path, sheet=(REFERENCE / "design_sheet.yaml").read_text() + "\n", name="c"), FILES)
    assert a.digest == b.digest != c.digest and a.student == "a"


# ---- incidents: the demo, per student, every combination -----------------------------------------
def test_the_shipped_demo_bundle_is_what_the_generator_writes(tmp_path, demo):
    write_bundle(demo, tmp_path / "demo")
    shipped = ROOT / "assignments" / "lesson6" / "demo"
    names = sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(tmp_path / "demo") for p in (tmp_path / "demo").rglob("*") if p.is_file())
    for name in names:
        assert (shipped / name).read_bytes() == (tmp_path / "demo" / name).read_bytes(), name


def test_the_taxonomy_is_the_schemas_and_every_fault_has_a_mechanism_in_it():
    schema = json.loads((ROOT / "rubrics" / "diagnosis.schema.json").read_text())
    assert schema["properties"]["causes"]["items"]["properties"]["mechanism"]["enum"] == list(MECHANISMS)
    assert {f.mechanism for f in FAULTS.values()} <= set(MECHANISMS)
    readme = (ROOT / "assignments" / "lesson6" / "README.md").read_text()
    assert all(f"| `{m}` |" in readme for m in MECHANISMS)


def test_evidence_support_is_read_from_the_data(demo):
    items = {i.key: i for i in demo.evidence()}
    assert items["audit:use_after_free"].count == 0 and not items["audit:use_after_free"].supports
    assert items["steps:long"].supports == {"stall_hidden_by_average"}      # within R42's 0.3 s budget
    assert not items["steps:over_budget"].supports and not items["steps:decode_only"].supports
    assert "inactive_hits_as_free" in items["audit:over_commit"].supports
    assert sorted(i.id for i in demo.evidence()) == sorted(f"E{n}" for n in range(1, 20))


# A student's incident is drawn from the secret: what these tests expect of it holds under
# each of conftest's secrets (the `secret` fixture).
def test_a_student_incident_is_theirs_and_the_same_every_time(tmp_path, secret):
    key = incidents_key(secret)
    alice, again, bob = (student_incident(COURSE, key, s) for s in ("alice", "alice", "bob"))
    assert alice.identity() == again.identity() and alice.id != bob.id
    assert student_incident(COURSE, incidents_key(other_than(secret)), "alice").id != alice.id
    assert 2 <= len(alice.faults) <= 3 and len(alice.changes) > len(alice.faults)
    write_bundle(alice, tmp_path / "bundle")
    text = "".join(p.read_text() for p in (tmp_path / "bundle").rglob("*") if p.is_file())
    assert not any(str(s) in text for s in alice.replay_seeds), "the replay seeds are hidden"
    assert all(f.fault not in text for f in alice.faults), "the bundle does not name the faults"


def test_grading_a_student_uses_their_own_incident(tmp_path, secret):
    alice = student_incident(COURSE, incidents_key(secret), "alice")
    answer = write_answer(alice, tmp_path / "alice")
    report = grade_path("lesson6", answer, COURSE, mode="grade", secret=secret)
    assert scores(report) == ALL, [c.feedback for c in report.criteria]
    assert {c["visibility"] for c in report.cases} == {"public", "hidden"}
    # Alice's answer handed in by bob is graded on bob's incident.
    bob = grade_path("lesson6", answer, COURSE, mode="grade", secret=secret, student="bob")
    assert bob.score < report.score
    assert any(c.feedback.startswith(f"your diagnosis names incident {alice.id!r}, but your own incident "
                                     f"{student_incident(COURSE, incidents_key(secret), 'bob').id!r} "
                                     "(the id in your bundle's incident.yaml) is graded. Judged against ")
               for c in bob.criteria), [c.feedback for c in bob.criteria]


def test_every_fault_combination_is_settled_and_its_reference_gets_full_marks(tmp_path):
    """The public forms (the demo's and the practice incidents'); the students' forms are
    tests/test_lesson6_students_forms.py's."""
    for combo in combinations(public=True):
        incident = draw(COURSE, 0, "combo", faults=combo, public_forms=True)
        assert settled(incident), combo
        assert {c.fault for c in incident.faults} == set(combo)
        report = grade_on(incident, write_answer(incident, tmp_path / "-".join(combo)))
        assert scores(report) == ALL, (combo, [c.feedback for c in report.criteria if not c.passed])


def _graded(incident, diagnosis, sheet, where: Path):
    where.mkdir(parents=True, exist_ok=True)
    (where / "diagnosis.yaml").write_text(yaml.safe_dump(diagnosis))
    (where / "design_sheet.yaml").write_text(yaml.safe_dump(sheet))
    return grade_on(incident, where)


@pytest.mark.parametrize("combo", [("key_unscoped", "reclaim_at_cancel", "stall_hidden"),
                                   ("attention_dropped", "key_unscoped", "reclaim_never"),
                                   ("attention_dropped", "inactive_free", "reclaim_at_cancel")])
def test_each_kind_of_wrong_diagnosis_on_other_faults(combo, tmp_path):
    """The same classes of mistake on incidents with other faults lose the same criteria."""
    incident = draw(COURSE, 0, "combo", faults=combo, public_forms=True)
    right, sheet = reference_diagnosis(incident), reference_sheet(incident)
    faults = len(incident.faults)
    # Every change named: the harmless ones with a mechanism some item supports.
    some = next(i for i in incident.evidence() if i.supports)
    guess = {"incident": incident.id, "causes": right["causes"] + [
        {"change": c.id, "mechanism": sorted(some.supports)[0], "evidence": [some.id],
         "fix": {"chunk_rule": {"gap_budget_s": 0.1}}} for c in incident.changes if not c.fault]}
    share = max(0.0, (faults / len(incident.changes) - 0.4) / 0.6)
    assert lost(_graded(incident, guess, sheet, tmp_path / "guess")) == {"causes-precision": round(2 - 2 * share, 4)}
    # The right changes, citing only items that show nothing.
    nothing = next(i.id for i in incident.evidence() if not i.supports)
    unsupported = {"incident": incident.id, "causes": [dict(c, evidence=[nothing]) for c in right["causes"]]}
    assert lost(_graded(incident, unsupported, sheet, tmp_path / "none")) == \
        {"causes-found": 3.0, "causes-precision": 2.0, "evidence": 2.0, "fix-replayed": 2.0}
    # One fault missed and left in the sheet (not the stall: its gate change costs the rollback
    # rule too, as stale_gate shows).
    kept = next(f for f in incident.faults if f.fault != "stall_hidden")
    partial = copy.deepcopy(sheet)
    for path, _, released in kept.diff:
        set_path(partial, path, released)
    missed = {"incident": incident.id, "causes": [c for c in right["causes"] if c["change"] != kept.id]}
    assert lost(_graded(incident, missed, partial, tmp_path / "missed")) == \
        {"causes-found": round(3 / faults, 4), "fix-replayed": 2.0}


def test_symptoms_conflict_and_cover_every_fault(demo):
    reports = symptoms(demo)
    assert len(reports) == len(demo.faults) == 2
    assert "freeze mid-reply" in reports[0] and "promised more pages than the pool could give" in reports[1]


# ---- the commands and the class ----------------------------------------------------------------------
def test_check_and_grade_commands(tmp_path, capsys):
    assert main(["check", "lesson6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 0
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    answer = write_answer(student_incident(COURSE, incidents_key(SECRET), "carol"), tmp_path / "carol")
    assert main(["grade", "lesson6", str(answer), "--secret-file", str(secret), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["score"] == report["max_score"] == 10


def test_incident_command(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["incident", "--out", str(tmp_path / "x")])             # --student or --demo
    assert main(["incident", "--student", "dan", "--out", str(tmp_path / "x")]) == 2
    assert "--secret-file" in capsys.readouterr().err
    secret = tmp_path / "course.secret"
    secret.write_bytes(SECRET)
    out = tmp_path / "dan"
    assert main(["incident", "--student", "dan", "--secret-file", str(secret), "--out", str(out),
                 "--answer", str(tmp_path / "dan-answer")]) == 0
    incident_id = student_incident(COURSE, incidents_key(SECRET), "dan").id
    assert yaml.safe_load((out / "incident.yaml").read_text())["incident"] == incident_id
    assert (tmp_path / "dan-answer" / "diagnosis.yaml").is_file()
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    assert main(["incident", "--demo", "--out", str(tmp_path / "full")]) == 2     # not a bundle: kept
    assert (tmp_path / "full" / "keep.txt").is_file()


def test_a_class_of_folders_grades_each_on_their_own_incident(tmp_path, secret):
    key = incidents_key(secret)
    root = tmp_path / "class" / "submitted"
    erin = write_answer(student_incident(COURSE, key, "erin"), root / "erin" / "lesson6")
    shutil.copytree(erin, root / "frank" / "lesson6")                          # frank copies erin
    (root / "gina" / "lesson6").mkdir(parents=True)                            # gina handed in nothing
    with open_gradebook(str(tmp_path / "gb.db")) as book:
        summary = run_batch("lesson6", tmp_path / "class", COURSE, secret, book, jobs=1, progress=False)
        results = {r.student: r for r in book.results()}
    assert summary.graded == 2 and [s for s, _ in summary.failed] == ["gina"]
    assert results["erin"].score == 10 and results["frank"].score < 10


# ---- the README's worked example is what the grader computes -----------------------------------------
def test_readme_worked_example_is_computed(demo):
    text = " ".join((ROOT / "assignments" / "lesson6" / "README.md").read_text().split())
    for line in symptoms(demo):
        assert line in text
    items = {i.key: i for i in demo.evidence()}
    for key, eid, count in (("steps:long", "E7", 35), ("requests:slow_tokens", "E10", 57),
                            ("audit:over_commit", "E14", 4), ("series:headroom", "E17", 17),
                            ("requests:preempted", "E15", 1), ("report:gate", "E2", 1),
                            ("steps:over_budget", "E16", 0)):
        assert (items[key].id, items[key].count) == (eid, count)
    for phrase in ("`E7` selects the 35 steps", "`E10` selects the 57 requests", "`E14` selects the 4",
                   "`E17` selects the 17 samples", "90.1% -> 33.1%", "interactive class is at 90.1% on R41 and 89.4% on R42",
                   "| R42 | 4.315 req/s | 33.1% | 4 broken promises, 7 over-commits |",
                   "ship (+41.3%, noise band ±0.362 req/s)"):
        assert phrase in text, phrase
    c4 = next(c for c in demo.changes if c.id == "C4")
    assert not c4.fault and c4.diff[0][0] == "chunk_rule.fixed_tokens"
    knobs = policy_sheet(demo.release)           # fixed_tokens is dropped there; run with it, both ways
    runs = [[run_design(demo.scenario.model, Design("r42", {**knobs, "chunk_rule": {**knobs["chunk_rule"],
                                                                                   "fixed_tokens": n}},
                                                    demo.scenario.worker), demo.scenario.workload, seed)[1].digest()
             for seed in demo.replay_seeds[:2]] for n in (512, 1024)]
    assert runs[0] == runs[1]
    report = yaml.safe_load((ROOT / "assignments" / "lesson6" / "demo" / "evidence" / "release_report.yaml").read_text())
    assert report["attainment"]["interactive"] == {"R41": 0.9011, "R42": 0.8936}
    assert report["decision"] == "inconclusive"


def test_discovery_finds_folder_submissions_in_both_layouts(tmp_path):
    from grader.instructor.batch import discover
    flat = tmp_path / "flat"
    (flat / "hana").mkdir(parents=True)
    shutil.copy(REFERENCE / "diagnosis.yaml", flat / "hana" / "diagnosis.yaml")
    (flat / "ivan").mkdir()                                          # nothing handed in
    nb = tmp_path / "nb" / "submitted" / "jo" / "lesson6"
    nb.mkdir(parents=True)
    shutil.copy(REFERENCE / "design_sheet.yaml", nb / "design_sheet.yaml")
    got = {e.student: (Path(e.path).name, bool(e.problem)) for e in discover(flat, "lesson6")}
    assert got == {"hana": ("hana", False), "ivan": ("lesson6", True)}
    [jo] = discover(tmp_path / "nb", "lesson6")
    assert (jo.student, Path(jo.path), jo.problem) == ("jo", nb, "")
    assert load_submission(nb, FILES, jo.student).student == "jo"


def test_evidence_asked_before_a_release_is_still_recorded_for_it():
    """A process that checked a practice incident and then builds the edition: the sealed
    evidence it already derived is recorded all the same (no copy answers past recording)."""
    from grader.course.incident import practice_incidents
    from grader.engine.oracle import recording
    sealed = practice_incidents(COURSE)[0].sealed()
    first = sealed.evidence()
    with recording() as tables:
        again = sealed.evidence()
    assert again == first
    assert list(tables["figures-lesson6-sealed-evidence"].values()) == [first]
    assert "figures-lesson6-evidence" not in tables         # the plain form is never recorded


def test_a_students_incident_is_the_same_whatever_unicode_form_their_name_comes_in():
    import unicodedata
    key = incidents_key(SECRET)
    composed = student_incident(COURSE, key, "José Núñez")
    assert student_incident(COURSE, key, unicodedata.normalize("NFD", "José Núñez")).id == composed.id
    assert student_incident(COURSE, key, "Jose Nunez").id != composed.id       # another student


def test_a_sheet_beside_a_diagnosis_that_fixes_nothing_earns_no_replay(tmp_path):
    """The fix is the diagnosis's design-sheet values, carried by the sheet: a readable
    diagnosis with no cause (the stub's) and a sheet that ships (the last good release's
    own, or the reference's) is no fix of anything found."""
    report = grade("lesson6", folder(tmp_path, diagnosis="incident: p1\ncauses: []\n"))
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    assert fix.score == 0 and fix.feedback.startswith("your diagnosis states no fix")
    assert scores(report)["rollback-rule"] == 1            # the sheet's own criterion still pays


def test_a_cause_citing_one_item_that_shows_nothing_and_one_that_shows_its_mechanism_says_which():
    """'E8 does not show it; what you cite shows it' read as a contradiction: each sentence
    names its items."""
    from grader.lessons.lesson6 import _judge
    p1 = {i.id: i for i in practice_incidents(COURSE)}["p1"]
    harmless = next(c for c in p1.changes if not c.fault)
    items = p1.evidence()
    mechanism = next(m for m in MECHANISMS if any(i.shows(m) for i in items)
                     and any(not i.shows(m) for i in items))
    shows = next(i.id for i in items if i.shows(mechanism))
    blank = next(i for i in items if not i.shows(mechanism))
    claim = _judge(p1, {"change": harmless.id, "mechanism": mechanism, "evidence": [blank.id, shows],
                        "fix": {}}, 1)
    rows = "1 row" if blank.count == 1 else f"{blank.count} rows"
    assert claim.why == (f"the evidence you cite for {harmless.id}, {blank.id} ({blank.select}, {rows}), "
                         f"does not show {mechanism}; {shows} shows {mechanism}, but nothing in it "
                         f"ties {mechanism} to {harmless.id}")


@pytest.mark.parametrize("diagnosis", ["harmless-fix", "wrong-mechanisms", "none"])
def test_the_last_good_sheet_beside_nothing_found_earns_no_replay(tmp_path, practice, diagnosis):
    """The bundle ships R41's own sheet, and R41 ships against R42: copied with a release R43
    beside a diagnosis that finds nothing (a harmless change's revert as its one fix, every
    change with a mechanism not its own, or no diagnosis at all) it replayed as a fix."""
    p1 = practice["p1"]
    harmless = next(c for c in p1.changes if not c.mechanism)
    wrong = next(m for m in MECHANISMS if m not in {c.mechanism for c in p1.changes})
    causes = {"harmless-fix": [{"change": harmless.id, "mechanism": p1.faults[0].mechanism,
                                "evidence": [i.id for i in p1.supporting(p1.faults[0].mechanism)],
                                "fix": nested((p, was) for p, was, _ in harmless.diff)}],
              "wrong-mechanisms": [{"change": c.id, "mechanism": wrong, "evidence": ["E1"],
                                    "fix": nested((p, was) for p, was, _ in c.diff)} for c in p1.changes]}
    last_good = copy.deepcopy(dict(p1.baseline))
    last_good["change_record"] = reference_sheet(p1)["change_record"]
    # The sheet alone replays as a fix: what the criterion must not pay for here.
    from grader.course.incident import judge_fix
    assert judge_fix(p1, last_good).passed
    d = folder(tmp_path, sheet=yaml.safe_dump(last_good),
               diagnosis=False if diagnosis == "none" else yaml.safe_dump({"incident": "p1",
                                                                          "causes": causes[diagnosis]}))
    report = grade("lesson6", d)
    assert scores(report) == dict.fromkeys(ALL, 0.0) | {"rollback-rule": 1.0}, \
        {c.id: c.feedback for c in report.criteria}
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    assert "the replay judges the fix of the causes" in fix.feedback


def test_citing_the_whole_index_demonstrates_nothing(tmp_path, practice):
    """Every change named with every mechanism of the incident, each claim citing every item:
    'some cited item shows it' held of every claim, and the shotgun found every root cause
    (6 of 10, not one item read). At least half of what a claim cites must show its
    mechanism; a stray item beside a right one (half) stays the evidence criterion's."""
    p1 = practice["p1"]
    items = [i.id for i in p1.evidence()]
    every = [{"change": c.id, "mechanism": m, "evidence": list(items),
              "fix": nested((p, was) for p, was, _ in c.diff)}
             for c in p1.changes for m in sorted({f.mechanism for f in p1.faults})]
    sheet = copy.deepcopy(dict(p1.baseline))
    sheet["change_record"] = reference_sheet(p1)["change_record"]
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump({"incident": "p1", "causes": every[:20]}),
                                     sheet=yaml.safe_dump(sheet)))
    assert scores(report) == dict.fromkeys(ALL, 0.0) | {"rollback-rule": 1.0}, \
        {c.id: c.feedback for c in report.criteria}
    found = next(c for c in report.criteria if c.id == "causes-found")
    assert f"of the {len(items)} items you cite for" in found.feedback, found.feedback
    # Said in a few sentences, not one per item: three items in full, the rest by id (the
    # whole index cited read as some 7,000 characters).
    assert found.feedback.count("the evidence you cite for") <= 3 * 3 and len(found.feedback) < 3000, found.feedback
    from grader.lessons.lesson6 import _judge
    claim = _judge(p1, every[0], 1)
    blank = [i.id for i in p1.evidence() if not i.shows(every[0]["mechanism"])]
    assert claim.why.count("does not show") == 3
    assert claim.why.endswith(f"nor do {len(blank) - 3} more items you cite for {every[0]['change']} show "
                              f"{every[0]['mechanism']} ({', '.join(blank[3:])})"), claim.why
    absent = _judge(p1, dict(every[0], evidence=[f"E{n}" for n in range(50, 56)]), 1)
    assert absent.why.count("is not in the evidence index") == 3
    assert f"nor are 3 more items you cite for {every[0]['change']} in the index (E53, E54, E55)" in absent.why and absent.why.endswith("(E53, E54, E55)"), absent.why
    # Half of what a cause cites shows its mechanism: demonstrated; fewer: not.
    from grader.lessons.lesson6 import _judge
    fault = p1.faults[0]
    shows = [i.id for i in p1.evidence() if i.shows(fault.mechanism)]
    blank = [i.id for i in p1.evidence() if not i.shows(fault.mechanism)]
    fix = nested((p, was) for p, was, _ in fault.diff)
    half = _judge(p1, {"change": fault.id, "mechanism": fault.mechanism, "evidence": shows[:1] + blank[:1],
                       "fix": fix}, 1)
    fewer = _judge(p1, {"change": fault.id, "mechanism": fault.mechanism, "evidence": shows[:1] + blank[:2],
                        "fix": fix}, 1)
    assert half.demonstrated and not half.sound and not fewer.demonstrated
    assert fewer.why.startswith(f"only 1 of the 3 items you cite for {fault.id} show {fault.mechanism}")


def test_fixes_that_leave_the_regressed_release_running_as_it_did_earn_no_replay(tmp_path, practice):
    """Every root cause found, with its evidence, but each fix restating a value R42 already
    runs or reverting a knob no rule reads (p1's harmless fixed_tokens, under the budget
    rule, and the gate's noise_k), beside the last good release's own sheet: the sheet
    ships, and the diagnosis fixes nothing. Each found cause's fix is judged on its own: one
    real fix among the no-ops (it kept full marks) fixes one cause, and the sheet does the
    rest. Every cause's own fix beside the same sheet, which also reverts the harmless
    changes, is a different correct answer."""
    p1 = practice["p1"]
    harmless = [c for c in p1.changes if not c.mechanism]
    assert {p for c in harmless for p, _, _ in c.diff} == {"chunk_rule.fixed_tokens", "release_criteria.rule.noise_k"}
    assert p1.release["chunk_rule"]["rule"] != "fixed"
    right = reference_diagnosis(p1)
    assert len(right["causes"]) >= 3
    reverts = [nested((p, was) for p, was, _ in c.diff) for c in harmless]
    restated = {"chunk_rule": {"min_chunk_tokens": p1.release["chunk_rule"]["min_chunk_tokens"]}}
    fixes = [reverts[n % len(reverts)] if n % 2 else restated for n in range(len(right["causes"]))]
    last_good = copy.deepcopy(dict(p1.baseline))
    last_good["change_record"] = reference_sheet(p1)["change_record"]
    noop = {"incident": "p1", "causes": [dict(c, fix=copy.deepcopy(f)) for c, f in zip(right["causes"], fixes)]}
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(noop), sheet=yaml.safe_dump(last_good)))
    assert lost(report) == {"fix-replayed": 2.0}, {c.id: c.feedback for c in report.criteria}
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    assert fix.feedback.startswith(f"your fix of {right['causes'][0]['change']} leaves R42 running as it did")
    assert not any(c.fault in fix.feedback for c in p1.faults)
    # One cause's own fix among the others' no-ops: the next cause's fix is a harmless
    # change's revert, the fix of that change rather than of its cause.
    one = copy.deepcopy(noop)
    one["causes"][0]["fix"] = right["causes"][0]["fix"]
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(one), sheet=yaml.safe_dump(last_good),
                                     name="one"))
    assert lost(report) == {"fix-replayed": 2.0}, {c.id: c.feedback for c in report.criteria}
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    second, owner = right["causes"][1]["change"], harmless[1 % len(harmless)]
    assert fix.feedback.startswith(f"your fix of {second} sets only what other changes of R42 set "
                                   f"({owner.diff[0][0]}, which {owner.id} changed), nothing of {second}'s own"), \
        fix.feedback
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(right), sheet=yaml.safe_dump(last_good),
                                     name="all"))
    assert lost(report) == {}, {c.id: c.feedback for c in report.criteria}


@pytest.mark.parametrize("n", [0, 1, 2])
def test_one_cause_named_of_three_beside_the_last_good_sheet_earns_no_replay(tmp_path, practice, n):
    """One root cause of p1's three named and fixed right, beside the bundle's R41 sheet
    (every change reverted): the sheet replayed as a fix of all three, 8 of 10, where naming
    and fixing the one cause alone lost the replay too, and so does that cause's fix stated
    as a revert of all three. A value a change at fault set runs as R42 has it unless the fix
    stated for that change sets it; the feedback says so in words that name no change."""
    p1 = practice["p1"]
    right = reference_diagnosis(p1)
    assert len(right["causes"]) == len(p1.faults) == 3
    last_good = copy.deepcopy(dict(p1.baseline))
    last_good["change_record"] = reference_sheet(p1)["change_record"]
    one = {"incident": "p1", "causes": [right["causes"][n]]}
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(one), sheet=yaml.safe_dump(last_good)))
    assert lost(report) == {"causes-found": 2.0, "fix-replayed": 2.0}, {c.id: c.feedback for c in report.criteria}
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    assert ("a value a change at fault set runs as R42 has it unless the fix you state for that change "
            "sets it" in fix.feedback), fix.feedback
    others = [c.id for c in p1.changes if c.id != right["causes"][n]["change"]]
    assert not any(f"{c} " in fix.feedback or f"{c}," in fix.feedback for c in others), fix.feedback
    # The one cause's fix reverting every change at fault: the others' values are theirs.
    every = {"incident": "p1", "causes": [dict(right["causes"][n], fix=copy.deepcopy(right["causes"][n]["fix"]))]}
    for cause in right["causes"]:
        for section, values in cause["fix"].items():
            every["causes"][0]["fix"].setdefault(section, {}).update(values)
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(every), sheet=yaml.safe_dump(last_good),
                                     name="every"))
    assert lost(report) == {"causes-found": 2.0, "fix-replayed": 2.0}, {c.id: c.feedback for c in report.criteria}


def test_a_fix_stated_under_another_cause_earns_no_replay(tmp_path, practice):
    """Every root cause found, the sheet right, but two causes' fixes swapped (each one the
    other change's revert), or every fix stated under the first cause and the others
    restating R42: the union of the fixes is right and kept full marks, while no cause's
    own fix is. A fix that moves a value of its own change beside another change's (a chunk
    rule of its own for a chunk fault) may be a fix of its own."""
    p1 = practice["p1"]
    right = reference_diagnosis(p1)
    sheet = yaml.safe_dump(reference_sheet(p1))
    swapped = copy.deepcopy(right)
    first, second = swapped["causes"][0], swapped["causes"][1]
    first["fix"], second["fix"] = second["fix"], first["fix"]
    merged = copy.deepcopy(right)
    for cause in merged["causes"][1:]:
        for section, values in cause["fix"].items():
            merged["causes"][0]["fix"].setdefault(section, {}).update(values)
        cause["fix"] = {"chunk_rule": {"min_chunk_tokens": p1.release["chunk_rule"]["min_chunk_tokens"]}}
    owner = next(c for c in p1.changes if c.id == second["change"])
    for name, diagnosis, said in (
            ("swapped", swapped, f"your fix of {first['change']} sets only what other changes of R42 set "
                                 f"({owner.diff[0][0]}, which {owner.id} changed), nothing of {first['change']}'s own"),
            ("merged", merged, f"your fix of {merged['causes'][1]['change']} leaves R42 running as it did")):
        report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(diagnosis), sheet=sheet, name=name))
        assert lost(report) == {"fix-replayed": 2.0}, (name, {c.id: c.feedback for c in report.criteria})
        fix = next(c for c in report.criteria if c.id == "fix-replayed")
        assert fix.feedback.startswith(said), (name, fix.feedback)
    # The chunk fault fixed by a chunk rule of its own choosing (not R41's), which moves a value
    # a harmless change set too: a fix of its own. That value alone is another change's.
    from grader.lessons.lesson6 import _fix_problem
    chunk = next(c for c in p1.faults if c.diff[0][0].startswith("chunk_rule."))
    fixed_tokens = next(c for c in p1.changes if c.diff[0][0] == "chunk_rule.fixed_tokens")
    assert chunk.diff[0][0] == "chunk_rule.rule" and not fixed_tokens.mechanism
    own_rule = {"change": chunk.id, "fix": {"chunk_rule": {"rule": "fixed", "fixed_tokens": 256}}}
    assert _fix_problem(p1, own_rule) == ""
    assert _fix_problem(p1, dict(own_rule, fix={"chunk_rule": {"fixed_tokens": 256}})).startswith(
        f"your fix of {chunk.id} sets only what other changes of R42 set (chunk_rule.fixed_tokens, which "
        f"{fixed_tokens.id} changed)")


def test_a_found_causes_fix_is_replayed_as_stated_not_as_the_sheet_does_it(tmp_path, practice):
    """Every root cause found, but the ledger fault's fix stated as a chunk knob no change
    set (another gap budget), beside a sheet that also undoes the ledger change: the sheet
    shipped, and the fix stated for the cause was one of no consequence for it. The values a
    change at fault set come from the stated fixes alone."""
    p1 = practice["p1"]
    right = reference_diagnosis(p1)
    ledger = next(c for c in right["causes"] if "admission_ledger" in c["fix"])
    budget = p1.release["chunk_rule"]["gap_budget_s"]
    assert not any(p == "chunk_rule.gap_budget_s" for c in p1.changes for p, _, _ in c.diff)
    ledger["fix"] = {"chunk_rule": {"gap_budget_s": budget * 0.9}}
    sheet = reference_sheet(p1)
    sheet["chunk_rule"]["gap_budget_s"] = budget * 0.9
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(right), sheet=yaml.safe_dump(sheet)))
    assert lost(report) == {"fix-replayed": 2.0}, {c.id: c.feedback for c in report.criteria}
    fix = next(c for c in report.criteria if c.id == "fix-replayed")
    assert "the replay judges the fixes your diagnosis states" in fix.feedback, fix.feedback
    # The same sheet beside the ledger's own fix, the gap budget stated too: a fix.
    ledger["fix"] = {"admission_ledger": {"inactive_hits": "consume"}, "chunk_rule": {"gap_budget_s": budget * 0.9}}
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(right), sheet=yaml.safe_dump(sheet),
                                     name="own"))
    assert lost(report) == {}, {c.id: c.feedback for c in report.criteria}


@pytest.mark.parametrize("rule,when", [({"max_class_drop": 1.0}, "class_drop"),
                                       ({"noise_k": 100.0}, "goodput_fell_beyond_band")],
                         ids=["class-drop-never", "band-never"])
def test_a_rollback_condition_is_judged_under_the_new_releases_own_rule(tmp_path, practice, rule, when):
    """R43 rolls back on one condition R42 met under R41's rule, but its own
    release_criteria.rule sets that condition's threshold where nothing reaches it: the rule
    it states never fires. The same condition under the rule it kept still pays."""
    p1 = practice["p1"]
    sheet = reference_sheet(p1)
    sheet["change_record"][-1]["rollback"]["when"] = [when]
    kept = grade("lesson6", folder(tmp_path, sheet=yaml.safe_dump(sheet), name="kept"))
    assert lost(kept) == {}, {c.id: c.feedback for c in kept.criteria}
    sheet["release_criteria"]["rule"].update(rule)
    report = grade("lesson6", folder(tmp_path, sheet=yaml.safe_dump(sheet)))
    assert lost(report) == {"rollback-rule": 1.0}, {c.id: c.feedback for c in report.criteria}
    said = next(c.feedback for c in report.criteria if c.id == "rollback-rule")
    assert said.startswith(f"your rollback conditions ({when}) would not have rolled R42 back under the "
                           "thresholds of your release_criteria.rule; under them this incident meets: "), said
    assert when not in said.split("meets: ", 1)[1]


@pytest.mark.parametrize("said", ["P2", "p2 ", "\uff50\uff12"], ids=["upper", "space", "full-width"])
def test_the_practice_incident_is_found_however_its_id_is_typed(tmp_path, practice, said):
    """p2's right answer under `incident: P2` was graded as a diagnosis of p1: every item
    read against the wrong bundle, 1 of 10."""
    answer = write_answer(practice["p2"], tmp_path / "p2")
    text = (answer / "diagnosis.yaml").read_text()
    assert "incident: p2\n" in text
    (answer / "diagnosis.yaml").write_text(text.replace("incident: p2\n", f"incident: {json.dumps(said)}\n"))
    report = grade("lesson6", answer)
    assert scores(report) == ALL, {c.id: c.feedback for c in report.criteria}
    assert {c["name"] for c in report.cases} == {"p1", "p2"}


@pytest.mark.parametrize("fix,sheet_has", [
    ({"admission_ledger": {"inactive_hitz": "consume"}}, "has no admission_ledger.inactive_hitz"),
    ({"admission_ledger": {"inactive_hits": "consume", "prefix_cache": "true"}},
     "prefix_cache: a string 'true', but design_sheet.yaml has a boolean true"),
    ({"admission_ledger": {"inactive_hits": "consume"}, "chunk_rule": {"gap_budget_s": "1e-1"}},
     "gap_budget_s: a string '1e-1' (YAML reads 1e-1 as text; as a number write 0.1), but "
     "design_sheet.yaml has a number 0.1"),
], ids=["absent", "bool-as-text", "number-as-text"])
def test_a_fix_the_sheet_does_not_carry_is_said_in_yamls_words(tmp_path, fix, sheet_has):
    """The sheet's missing key read as if it held the words '(absent)', and a string 'true'
    beside the boolean read as 'true' against 'True'."""
    right = yaml.safe_load((REFERENCE / "diagnosis.yaml").read_text())
    assert right["causes"][0]["fix"] == {"admission_ledger": {"inactive_hits": "consume"}}
    right["causes"][0]["fix"] = fix
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(right)))
    said = next(c.feedback for c in report.criteria if c.id == "fix-replayed")
    assert sheet_has in said and said.endswith("the sheet you ship must carry your fixes"), said
    assert "(absent)" not in said and "True" not in said


def test_a_release_recorded_before_r42_is_told_where_it_belongs(tmp_path, practice):
    """R43 written at the top of the change record (the README's example entry opens the
    list) lost the rollback point with "the change record has no release after R42": true of
    the record's order, not of what the learner had written. The feedback now says the record
    runs oldest first; only the order is wrong, so the fix is unchanged."""
    sheet = reference_sheet(practice["p1"])
    record = sheet["change_record"]
    assert [entry["release"] for entry in record] == ["R41", "R42", "R43"]
    sheet["change_record"] = record[-1:] + record[:-1]
    report = grade("lesson6", folder(tmp_path, sheet=yaml.safe_dump(sheet)))
    assert lost(report) == {"rollback-rule": 1.0}, {c.id: c.feedback for c in report.criteria}
    said = next(c.feedback for c in report.criteria if c.id == "rollback-rule")
    assert said == ("your change record lists R43 before R42: the record runs oldest first, so your "
                    "release comes after R42, as its last entry"), said
    # A record with no release of the learner's at all is still told to record one.
    sheet["change_record"] = record[:-1]
    report = grade("lesson6", folder(tmp_path, sheet=yaml.safe_dump(sheet), name="none"))
    said = next(c.feedback for c in report.criteria if c.id == "rollback-rule")
    assert said.startswith("the change record has no release after R42: record your fixes as release R43"), said


def test_a_practice_incidents_figures_are_kept_on_disk_and_a_students_never(tmp_path, monkeypatch):
    """A check after the first replays nothing of a practice incident (its evidence, its
    regression and the verdict on a fix are read back from the cache folder); nothing of a
    student's incident, which is hidden, is written there."""
    from grader.course import incident as module
    from grader.course.incident import judge_fix, regression
    from grader.engine import memo
    cache = tmp_path / "cache"
    monkeypatch.setenv("GRADER_CACHE", str(cache))
    monkeypatch.setattr(memo, "_memory", {})          # nothing this process computed before

    def written() -> set[str]:
        return {p.name.rsplit("-", 1)[0] for p in cache.glob("lesson6-*.json")} if cache.is_dir() else set()

    alice = student_incident(COURSE, incidents_key(SECRET), "alice")
    alice.evidence(), regression(alice), judge_fix(alice, reference_sheet(alice))
    assert written() == set()

    sealed = practice_incidents(COURSE)[0].sealed()
    figures = sealed.evidence(), regression(sealed), judge_fix(sealed, reference_sheet(sealed))
    # Drawing it settled it on its plain evidence: kept too, in the instructor's cache only
    # (the learner edition records the sealed form alone).
    assert written() == {"lesson6-evidence", "lesson6-sealed-evidence", "lesson6-regression", "lesson6-fix"}
    # Read back by a process that computes nothing: the same figures.
    monkeypatch.setattr(memo, "_memory", {})
    monkeypatch.setattr(module, "_judge_fix", lambda *a: pytest.fail("a kept verdict was replayed"))
    monkeypatch.setattr(module, "rollback_conditions", lambda *a: pytest.fail("kept conditions were replayed"))
    monkeypatch.setattr(module, "observe", lambda *a: pytest.fail("kept evidence was observed again"))
    assert (sealed.evidence(), regression(sealed), judge_fix(sealed, reference_sheet(sealed))) == figures


def test_a_cause_stated_again_does_not_dilute_another_causes_unsupported_evidence(tmp_path, practice):
    """A cause is a change with a mechanism (precision counts them so): the evidence criterion
    charges a cause whose citations are not all its mechanism's, and one sound cause stated
    again and again is the same cause. Counted per statement, a stray item beside one cause
    (1 of 3 causes, 1.33 of 2) was thinned to 1 of 20 (1.9 of 2) by stating another right
    cause 17 more times; on a student's own incident, 9.0 became 9.9 of 10."""
    p1 = practice["p1"]
    right = reference_diagnosis(p1)
    blank = next(i.id for i in p1.evidence() if not i.shows(right["causes"][1]["mechanism"]))
    stray = copy.deepcopy(right)
    stray["causes"][1]["evidence"].append(blank)
    padded = copy.deepcopy(stray)
    padded["causes"] += [copy.deepcopy(right["causes"][0]) for _ in range(17)]
    sheet = yaml.safe_dump(reference_sheet(p1))
    once = grade("lesson6", folder(tmp_path, yaml.safe_dump(stray), sheet, name="once"))
    again = grade("lesson6", folder(tmp_path, yaml.safe_dump(padded), sheet, name="again"))
    assert scores(once)["evidence"] == scores(again)["evidence"] == pytest.approx(4 / 3, abs=1e-3), \
        [c.feedback for c in again.criteria]
    feedback = next(c.feedback for c in again.criteria if c.id == "evidence")
    assert feedback.startswith(f"1 of your 3 causes is not supported as stated; cause 2 ({right['causes'][1]['change']}")
    # The same cause stated twice, once with a stray item: that cause is not supported as stated.
    twice = copy.deepcopy(right)
    twice["causes"].append(copy.deepcopy(stray["causes"][1]))
    report = grade("lesson6", folder(tmp_path, yaml.safe_dump(twice), sheet, name="twice"))
    assert scores(report)["evidence"] == pytest.approx(4 / 3, abs=1e-3)
    assert {k: v for k, v in scores(report).items() if k != "evidence"} == \
        {k: v for k, v in ALL.items() if k != "evidence"}


@pytest.mark.parametrize("key,value,advice", [
    ("admission_ledger.inactive_hits", "consume", "admission_ledger: {inactive_hits: consume}"),
    ("release_criteria.qualification.token_deadline", "largest_gap",
     "release_criteria: {qualification: {token_deadline: largest_gap}}"),
])
def test_a_fix_written_as_a_path_is_told_to_nest_it(tmp_path, key, value, advice):
    """changes.yaml writes a change as paths (admission_ledger.inactive_hits), and a fix
    written the same way was told 'causes[0].fix: expected one of request_contract, ...; got
    a string 'admission_ledger.inactive_hits'' and 'causes[0].fix.admission_ledger.inactive_hits:
    expected a mapping; got a string 'consume'': the second names a place the file does not
    have. One line says what the key is and how to write it."""
    diagnosis = yaml.safe_load((REFERENCE / "diagnosis.yaml").read_text())
    diagnosis["causes"][0]["fix"] = {key: value}
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(diagnosis, sort_keys=False)))
    feedback = next(c.feedback for c in report.criteria if c.id == "causes-found")
    assert f"causes[0].fix: {key!r} is a path: a fix is written as nested keys, {advice}" in feedback, feedback
    assert "expected a mapping" not in feedback and "expected one of" not in feedback, feedback
    # A key that is no section at all is told which keys a fix has.
    diagnosis["causes"][0]["fix"] = {"admission": {"inactive_hits": "consume"}}
    report = grade("lesson6", folder(tmp_path, diagnosis=yaml.safe_dump(diagnosis, sort_keys=False), name="other"))
    feedback = next(c.feedback for c in report.criteria if c.id == "causes-found")
    assert ("causes[0].fix: 'admission' is not a section a fix may set: a fix's keys are request_contract, "
            "admission_ledger, chunk_rule, cancellation, release_criteria") in feedback, feedback
