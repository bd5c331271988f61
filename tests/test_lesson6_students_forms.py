"""Lesson 6: a student's own incident is made of changes no public incident shows.

The demo and the practice incidents are drawn from the catalogue's public forms; a
student's from its students' forms: the same mechanisms under other summaries, values and
knobs, and harmless changes on knobs a fault moves. What the public incidents teach, change
by change, answers nothing about a student's own incident; the taxonomy and the evidence do.
(Its own file: settling every combination takes minutes, and the test runner gives each
file to one worker.)
"""
from __future__ import annotations

from conftest import scores
from grader.course.bundle import write_answer
from grader.course.incident import (combinations, demo_incident, draw, harmless_options, incidents_key,
                                    practice_incidents, student_incident)
from grader.lessons.oracles.incident_catalogue import CONFLICTS, FAULTS, HARMLESS
from test_lesson6 import ALL, COURSE, grade_on


def _forms(public: bool):
    return [e for e in (*FAULTS.values(), *HARMLESS.values()) if e.public == public]


def _diffs(entries) -> set:
    return {tuple(e.diff) for e in entries}


def test_the_public_incidents_hold_public_forms_and_a_students_holds_students_forms(secret):
    public = {e.summary for e in _forms(True)}
    students = {e.summary for e in _forms(False)}
    assert public and students and not public & students
    for incident in (demo_incident(COURSE), *practice_incidents(COURSE)):
        assert {c.summary for c in incident.changes} <= public, incident.id
    key = incidents_key(secret)
    for name in ("alice", "bob", "carol"):
        incident = student_incident(COURSE, key, name)
        assert {c.summary for c in incident.changes} <= students, (name, incident.id)
        assert incident.settled


def test_a_publicly_shown_change_never_comes_back_as_it_was_shown():
    """No students' form repeats a public form's words, and no harmless one its diff: a
    change looked up among the public incidents' is never found. Some students' faults move
    knobs no public fault moves, the stall comes at another value, and harmless forms move
    knobs a fault moves, so the knob a change sets does not say which it is either."""
    public, students = _forms(True), _forms(False)
    assert not {e.summary for e in public} & {e.summary for e in students}
    assert not _diffs(public) & _diffs(h for h in HARMLESS.values() if not h.public)
    fault_paths = {p for f in FAULTS.values() for p, _ in f.diff}
    public_fault_paths = {p for f in FAULTS.values() if f.public for p, _ in f.diff}
    assert {p for f in FAULTS.values() if not f.public for p, _ in f.diff} - public_fault_paths
    assert any({p for p, _ in h.diff} & fault_paths for h in HARMLESS.values() if not h.public)
    stalls = [f for f in FAULTS.values() if f.mechanism == "stall_hidden_by_average"]
    assert len(_diffs(stalls)) == len(stalls) > 1
    # every mechanism a public incident shows, a student's may show too
    assert {f.mechanism for f in FAULTS.values() if not f.public} >= {f.mechanism for f in FAULTS.values() if f.public}


def test_a_harmless_change_never_sets_a_knob_of_a_fault_it_is_drawn_with():
    for public in (True, False):
        # the draw picks harmless changes of a pool freely: no two of them set one knob
        paths = [p for h in HARMLESS.values() if h.public == public for p, _ in h.diff]
        assert len(paths) == len(set(paths)), public
        for combo in combinations(public):
            paths = [p for n in combo for p, _ in FAULTS[n].diff]
            assert len(paths) == len(set(paths)), combo
            groups = {FAULTS[n].group for n in combo}
            assert len(groups) == len(combo) and any(FAULTS[n].strong for n in combo)
            assert not any(c <= {FAULTS[n].mechanism for n in combo} for c in CONFLICTS), combo
            for h in harmless_options(combo, public):
                assert HARMLESS[h].public == public
                assert not {p for p, _ in HARMLESS[h].diff} & set(paths), (combo, h)
                assert not groups & set(HARMLESS[h].masks), (combo, h)
    # the filter is not vacuous: the stall's knob keeps the headroom change out, and a chunk
    # fault keeps fixed chunks out
    stall = next(n for n, f in FAULTS.items() if not f.public and f.mechanism == "stall_hidden_by_average")
    chunk = next(n for n, f in FAULTS.items() if not f.public and f.mechanism == "attention_term_dropped")
    with_stall = next(c for c in combinations() if stall in c)
    with_chunk = next(c for c in combinations() if chunk in c)
    assert "gap_headroom" not in harmless_options(with_stall) and "fixed_chunks" not in harmless_options(with_chunk)
    assert "gap_headroom" in harmless_options(with_chunk)


def test_every_students_fault_combination_is_settled_and_its_reference_gets_full_marks(tmp_path):
    drawn = {h: 0 for h in HARMLESS if not HARMLESS[h].public}
    for combo in combinations():
        # one seed, so the runs of R41 are shared; the harmless form drawn least so far
        pick = min(harmless_options(combo), key=lambda h: (drawn[h], h))
        drawn[pick] += 1
        incident = draw(COURSE, 0, "combo", faults=combo, harmless=(pick,))
        assert incident.settled, combo
        assert {c.fault for c in incident.faults} == set(combo)
        harmless = [c for c in incident.changes if not c.fault]
        assert harmless and all(c.summary in {h.summary for h in HARMLESS.values() if not h.public}
                                for c in harmless)
        report = grade_on(incident, write_answer(incident, tmp_path / "-".join(combo)))
        assert scores(report) == ALL, (combo, [c.feedback for c in report.criteria if not c.passed])
    # every harmless form of the students' was drawn, and settled, at least once
    assert min(drawn.values()) > 0, drawn

